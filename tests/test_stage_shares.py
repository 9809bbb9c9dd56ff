"""A hybrid's pipeline stages priced from their own layers (issue 22, kvplan/planning/stage_shares.py), not by
layer count: vLLM and SGLang cut the layers by count (get_pp_indices: vllm/distributed/utils.py; SGLang's
sglang/srt/distributed/utils.py) and each rank builds only its own layers, the embedding on the first, the LM head
on the last.

Nemotron-H-56B-Base-8K (its config.json: hidden 8,192; 64 q heads and 8 KV heads of 128; Mamba-2 with 256 heads of
64, 8 groups, state 256; MLP 32,768 wide, up and down only; hybrid_override_pattern of 118 blocks) in bf16:
  Mamba-2 mixer: in_proj 8,192 x (2 x 16,384 + 2 x 8 x 256 + 256) = 304,087,040, out_proj 16,384 x 8,192 =
    134,217,728: 438,304,768 parameters;
  attention: 8,192 x (8,192 + 2 x 1,024) + 8,192 x 8,192 = 150,994,944;  MLP block: 2 x 8,192 x 32,768 = 536,870,912.
At pp 4 the stages are layers 0-28, 29-58, 59-88, 89-117 (29, 30, 30, 29), holding (Mamba, attention, MLP) blocks
(14, 2, 13), (13, 3, 14), (14, 3, 13), (13, 2, 14) as the pattern places them.
"""

from __future__ import annotations

from kvplan.planning.deploy import Deployment, split_layers
from kvplan.planning.plan import Request, prepare
from kvplan.planning.stage_shares import stage_mixes
from kvplan.sources.catalog import find_in_catalog

MAMBA, ATTN, MLP = 438_304_768, 150_994_944, 536_870_912
TABLE = 131_072 * 8_192 * 2  # embedding, and the untied LM head: 2,147,483,648 B each
# the 16-bit parameters outside the linears and tables, spread by layer count (29/118 of them on a 29-layer stage),
# from the config: a norm of 8,192 on each of the 118 blocks and a final one, 119 x 8,192 = 974,848; each of the 54
# Mamba-2 layers ('M' in the pattern) its gated norm over 2 x 8,192 = 16,384, A_log, D and dt_bias (3 x 256 heads)
# and conv1d over 16,384 + 2 x 8 groups x 256 = 20,480 channels, 4 taps + a bias each (conv_kernel 4,
# use_conv_bias): 16,384 + 768 + 20,480 x 5 = 119,552, x 54 = 6,455,808. 974,848 + 6,455,808 = 7,430,656
SMALL = 7_430_656 * 2


def _stages(pp: int) -> list[int]:
    return [s.weight_bytes for s in prepare(find_in_catalog("nemotron-h-56b"), Deployment(1, pp), Request(8192)).stages]


def test_each_stage_weighs_its_own_blocks_at_pp_4():
    first, second, third, last = _stages(4)
    # (14 x 438,304,768 + 2 x 150,994,944 + 13 x 536,870,912) x 2 B = 26,835,156,992, + the embedding, + SMALL's share
    assert first == (14 * MAMBA + 2 * ATTN + 13 * MLP) * 2 + TABLE + SMALL * 29 // 118 == 28_986_292_996
    assert second == (13 * MAMBA + 3 * ATTN + 14 * MLP) * 2 + SMALL * 30 // 118 == 27_338_057_467
    assert third == (14 * MAMBA + 3 * ATTN + 13 * MLP) * 2 + SMALL * 30 // 118 == 27_140_925_179
    # the last stage: 13,516,144,640 parameters x 2 B + the LM head: the heaviest GPU, 29,183,425,284 B; by layer
    # count (29/118 of 108,338,872,320 B) it was 28,776,791,066, 406,634,218 B (388 MiB) light
    assert last == (13 * MAMBA + 2 * ATTN + 14 * MLP) * 2 + TABLE + SMALL * 29 // 118 == 29_183_425_284


def test_the_shares_at_pp_2():
    # 59 layers each: (27, 5, 27) blocks on both halves, so the mixers and the MLPs split evenly
    nemotron = find_in_catalog("nemotron-h-56b")
    (mix0, dense0, moe0), (mix1, dense1, _) = stage_mixes(nemotron, split_layers(nemotron.num_layers, 2))
    assert mix0 == mix1 == 0.5 and dense0 == dense1 == 0.5 and moe0 == 0.0
    first, last = _stages(2)
    assert first == last == (27 * MAMBA + 5 * ATTN + 27 * MLP) * 2 + TABLE + SMALL // 2


def test_a_model_of_like_layers_keeps_the_count_share():
    # Llama-3.1-8B: every layer the same, so nothing to price apart (rank_weights takes the count's share)
    llama = find_in_catalog("llama-3.1-8b")
    assert stage_mixes(llama, split_layers(llama.num_layers, 4)) == [(f, f, 0.0) for f in (0.25,) * 4]
