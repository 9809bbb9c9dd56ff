"""A user's layers per pipeline stage (`--engine-opt pp_layer_partition`, kvplan.engines.stage_split): the stages it
cuts, the binding stage's memory, the refusals (vLLM's and SGLang's get_pp_indices checks, and kvplan's), and fit."""

from __future__ import annotations

import pytest

from conftest import training_log
from kvplan.core.errors import KvplanError
from kvplan.engines import resolve_engine, stage_split
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment, split_layers
from kvplan.planning.plan import Request
from kvplan.sources.resolve import resolve_model

H100 = find_gpu("h100")


def _llama70b():
    return resolve_model("llama-3-70b").spec  # Meta-Llama-3.1-70B's config.json: 80 layers, 8 KV heads of 128


def _plan(engine: str, split: str, pp: int = 4, version: str | None = None):
    eng = resolve_engine(engine, version, [f"pp_layer_partition={split}"])
    return eng.result(_llama70b(), H100, Deployment(1, pp), Request(8192)).plan


def test_split_layers_takes_the_given_sizes_and_keeps_the_even_cut():
    # vLLM get_pp_indices with VLLM_PP_LAYER_PARTITION=19,21,20,20: start = sum(partitions[:rank]), end = start +
    # partitions[rank] (0.33.0 `distributed/utils.py` L238-239): [0,19), [19,40), [40,60), [60,80)
    assert split_layers(80, 4, (19, 21, 20, 20)) == [(0, 19), (19, 40), (40, 60), (60, 80)]
    # unset: its own cut, the remainder before the last stage (61 over 4: 15, 15, 16, 15, the log's
    # "Hidden layers were unevenly partitioned: [15,15,16,15]")
    assert [b - a for a, b in split_layers(61, 4)] == [15, 15, 16, 15]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_uneven_split_binds_on_its_largest_stage(engine):
    # Llama-3.1-70B in bf16 at tp 1: a layer caches K and V of 8 heads x 128 dims x 2 B = 2 x 8 x 128 x 2
    # = 4,096 B a token. Split 19,21,20,20 the second stage holds 21 layers, the most, with 21 x 4,096 = 86,016 B a
    # token; the even split's stages hold 20 layers, 81,920 B. Its weights (21 of the 80 layers' ~0.86 B parameters
    # each) also exceed the first stage's (19 layers + the 128,256 x 8,192 embedding), so it binds.
    plan = _plan(engine, "19,21,20,20")
    assert plan.deployment.stage_layers == (19, 21, 20, 20)
    assert [s.layers for s in plan.stages] == [(0, 19), (19, 40), (40, 60), (60, 80)]
    assert plan.binding_stage.layers == (19, 40)
    assert plan.kv_bytes_per_token_per_gpu == 86_016
    even = resolve_engine(engine).result(_llama70b(), H100, Deployment(1, 4), Request(8192)).plan
    assert even.kv_bytes_per_token_per_gpu == 81_920
    assert plan.kv_cache_tokens < even.kv_cache_tokens  # the 21-layer stage holds fewer tokens
    assert any("19,21,20,20 as given" in w.message for w in plan.warnings)


def test_vllm_blocks_follow_the_binding_stage():
    # vLLM keeps the minimum of its workers' num_gpu_blocks (kv_cache_utils v0.11.0 L1286): the 21-layer stage's,
    # its budget over a block id of 16 tokens x 86,016 B = 1,376,256 B
    eng = resolve_engine("vllm", None, ["pp_layer_partition=19,21,20,20"])
    res = eng.result(_llama70b(), H100, Deployment(1, 4), Request(8192))
    blocks = {f.label: f.value for f in res.capacity.lines}["num_gpu_blocks"]
    assert blocks == res.plan.binding_stage.kv_memory_bytes // 1_376_256
    # Against the even split (20 layers a stage, a block 16 x 81,920 = 1,310,720 B), from config.json alone: the even
    # split binds on its last stage (20 layers + the untied LM head 128,256 x 8,192 x 2 B = 2,101,346,304 B + the
    # final norm 16,384 B); the uneven one on stage 1 (21 layers, no head): one layer more, 2 B x (2 x 8,192^2 +
    # 2 x 8,192 x 1,024 + 3 x 8,192 x 28,672 + 2 x 8,192) = 1,711,308,800 B. Its KV budget is larger by
    # 2,101,362,688 - 1,711,308,800 = 390,053,888 B, each side floored to whole blocks.
    even = resolve_engine("vllm").result(_llama70b(), H100, Deployment(1, 4), Request(8192))
    even_blocks = {f.label: f.value for f in even.capacity.lines}["num_gpu_blocks"]
    assert abs(blocks * 1_376_256 - even_blocks * 1_310_720 - 390_053_888) < 1_376_256 + 1_310_720
    assert blocks < even_blocks


@pytest.mark.parametrize("split, pp, words", [
    ("19,21,20", 4, "names 3 stages, not pp=4"),  # get_pp_indices: len(partitions) does not match pp_size
    ("19,21,20,21", 4, "sums to 81 layers, not the model's 80"),  # sum(partitions) does not match num_hidden_layers
    ("0,40,20,20", 4, "leaves a stage without layers"),  # the engines take it; kvplan plans no empty stage
    ("-1,41,20,20", 4, "leaves a stage without layers"),
    ("19,21,20,20", 1, "names 4 stages, not pp=1"),
])
def test_refusals(split, pp, words):
    with pytest.raises(KvplanError, match=words):
        _plan("vllm", split, pp)


def test_malformed_and_unread_refused():
    with pytest.raises(KvplanError, match="whole numbers of layers"):
        _plan("sglang", "19;21;20;20")
    # the engines' int(layer) on each item refuses a trailing or doubled underscore ("Invalid partition string")
    for split in ("19_,21,20,20", "1__9,21,20,20"):
        with pytest.raises(KvplanError, match="whole numbers of layers"):
            _plan("vllm", split)
    for engine in ("trtllm", "llama.cpp"):
        with pytest.raises(KvplanError, match=f"not modelled for {engine}"):
            resolve_engine(engine, None, ["pp_layer_partition=40,40"])
    # VLLM_PP_LAYER_PARTITION is first read in 0.5.4 (envs.py L254-255); 0.5.3's get_pp_indices reads no variable
    with pytest.raises(KvplanError, match="before 0.5.4"):
        resolve_engine("vllm", "0.5.3", ["pp_layer_partition=40,40"])
    assert resolve_engine("vllm", "0.5.4", ["pp_layer_partition=40,40"])


def test_fit_cli_prints_the_split_and_refuses_in_one_line():
    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["fit", "llama-3-70b", "--gpu", "h100", "--ctx", "8k", "--engine", "vllm", "--pp", "4"]
    res = CliRunner().invoke(app, [*args, "--engine-opt", "pp_layer_partition=19,21,20,20"])
    assert res.exit_code == 0, res.output
    assert "layers per pipeline stage 19,21,20,20 as given" in res.output
    assert "layers 19-39" in res.output  # the binding stage shown: layers 19..39, 21 of them
    bad = CliRunner().invoke(app, [*args, "--engine-opt", "pp_layer_partition=20,20,40"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert "names 3 stages, not pp=4" in bad.output


def test_check_log_reads_the_split_from_the_command_line():
    # vllm-project/vllm#34076: `VLLM_PP_LAYER_PARTITION=16,32 ... vllm serve ... --pipeline-parallel-size 2` on a
    # 48-layer Qwen3-Coder-30B-A3B: the deployment checked is pp 2 with 16 and 32 layers, said in the notes
    from kvplan.engines.logparse import parse_log
    from kvplan.engines.logrecord import logged_deployment

    rec = parse_log(training_log("vllm-34076-qwen3-coder-30b-fp8-pp2"))
    notes: list[str] = []
    dep = logged_deployment(rec, None, notes)
    assert (dep.pp, dep.stage_layers) == (2, (16, 32))
    assert "layers per stage 16,32 (from the log: VLLM_PP_LAYER_PARTITION=16,32)" in notes[-1]
    # a split that does not fit the model planned against it is refused in one line, not planned evenly
    with pytest.raises(KvplanError, match="sums to 48 layers, not the model's 80"):
        resolve_engine("vllm").result(_llama70b(), H100, Deployment(1, 2, stage_layers=(16, 32)), Request(8192))


def test_the_plan_names_where_its_split_came_from():
    # the assumption names its source: the option, the log's command line (vllm#34076's 16,32 on a 48-layer
    # Qwen3-30B-A3B), or the release's own cut, also where a check passes that cut back in (check-log's vLLM and
    # SGLang paths cut the deployment first: engines/vllm/reconcile.py, engines/sglang/reconcile.py)
    from kvplan.engines.logparse import parse_log
    from kvplan.engines.logrecord import logged_deployment

    tail = "; memory is the binding stage's"
    option = [w.message for w in _plan("vllm", "19,21,20,20").warnings if "per pipeline stage" in w.message]
    assert option == ["layers per pipeline stage 19,21,20,20 as given (engine_opts pp_layer_partition)" + tail]
    rec = parse_log(training_log("vllm-34076-qwen3-coder-30b-fp8-pp2"))
    dep = logged_deployment(rec, None, [])
    plan = resolve_engine("vllm", "0.15.1").result(resolve_model("qwen3-30b-a3b").spec, H100, dep, Request(8192)).plan
    logged = [w.message for w in plan.warnings if "per pipeline stage" in w.message]
    assert logged == ["layers per pipeline stage 16,32 as the log sets them (VLLM_PP_LAYER_PARTITION=16,32)" + tail]
    vllm = resolve_engine("vllm", "0.7.3")
    cut = vllm.own_stages(_llama70b(), Deployment(1, 3))  # 0.7.3: 26, 26, 28
    said = stage_split.said(cut)
    assert cut.stage_layers == (26, 26, 28)
    assert [w.message for w in said] == ["layers per pipeline stage 26,26,28: vLLM 0.7.3's own split (the remainder "
                                         "on the last stage)" + tail]
    again = vllm.result(_llama70b(), H100, cut, Request(8192)).plan
    assert [w.message for w in again.warnings if "per pipeline stage" in w.message] == [said[0].message]


def test_sglang_before_pp_size_refuses_pipeline_stages():
    # SGLang's --pp-size first appears in 0.4.6.post2 (server_args.py L656; its models call get_pp_indices); the
    # 0.4.0, 0.4.3.post4, 0.4.5.post3, 0.4.6 and 0.4.6.post1 wheels have no such flag and call get_pp_indices nowhere
    for version in ("0.4.0", "0.4.3", "0.4.6.post1"):
        eng = resolve_engine("sglang", version)
        with pytest.raises(KvplanError, match="no pipeline parallelism before 0.4.6.post2") as e:
            eng.result(_llama70b(), H100, Deployment(1, 4), Request(8192))
        assert "\n" not in str(e.value)
        eng.result(_llama70b(), H100, Deployment(4, 1), Request(8192))  # tp alone plans
    resolve_engine("sglang", "0.4.6.post2").result(_llama70b(), H100, Deployment(1, 4), Request(8192))
    for version in ("0.4.3", "0.4.6", "0.4.6.post1"):  # the option, too, from 0.4.6.post2 (PP_FROM) only
        with pytest.raises(KvplanError, match="not modelled for sglang before 0.4.6.post2"):
            resolve_engine("sglang", version, ["pp_layer_partition=80"])
    resolve_engine("sglang", "0.4.6.post2", ["pp_layer_partition=80"])


@pytest.mark.parametrize("n, pp, form, sizes", [
    # vLLM 0.8.0 on (wheel `distributed/utils.py` L98-103): 61 // 4 = 15 each, remainder 1: partitions[-2] += 1
    (61, 4, "middle", (15, 15, 16, 15)),
    (62, 4, "middle", (15, 16, 16, 15)),  # remainder 2: partitions[-2] and [-3]
    # vLLM before 0.8 and SGLang before 0.5.6 (0.7.3 / 0.5.5 L85-91): ranks 0-2 take 15, the last ends at n: 61 - 45
    (61, 4, "last", (15, 15, 15, 16)),
    (62, 4, "last", (15, 15, 15, 17)),
    (61, 8, "last", (7, 7, 7, 7, 7, 7, 7, 12)),  # sgl-project/sglang#13282's "7, 7, 7, 7, 7, 7, 7, 12"
    # SGLang 0.5.6 on (L85-97): base 15, remainder 2; rank 2 starts at 2 x 16 - 2 = 30, rank 3 at 3 x 16 - 2 = 46
    (62, 4, "last ones", (15, 15, 16, 16)),
    (61, 8, "last ones", (7, 7, 7, 8, 8, 8, 8, 8)),  # remainder 5 on ranks 3-7
    # TensorRT-LLM torch.tensor_split: the first 62 % 4 = 2 sections one longer
    (62, 4, "first ones", (16, 16, 15, 15)),
    # llama.cpp equal shares: layer i on device floor(i x 4 / 81); i = 20 -> 80 / 81 -> 0, i = 21 -> 84 / 81 -> 1,
    # i = 40 -> 1 (160 / 81), i = 41 -> 2, i = 60 -> 2 (240 / 81), i = 61 -> 3: 21, 20, 20, 19 (the output is slot 80)
    (80, 4, "shares", (21, 20, 20, 19)),
    (80, 4, "middle", (20, 20, 20, 20)),
])
def test_each_engines_own_cut(n, pp, form, sizes):
    from kvplan.planning.deploy import cut_sizes

    assert cut_sizes(n, pp, form) == sizes


@pytest.mark.parametrize("engine, version, form", [
    ("vllm", "0.7.3", "last"), ("vllm", "0.8.0", "middle"),
    ("vllm", "0.8.0rc2.dev10", "last"),  # a build before 0.8.0 is read as the release before it: 0.7.x's cut
    ("sglang", "0.5.5.post3", "last"),  # the 0.5.5.post3 wheel (2025-11-17) still gives the last stage the remainder
    ("sglang", "0.5.6", "last ones"),
    ("trtllm", "1.2.0", "first ones"), ("llama.cpp", "current", "shares"),
    ("transformers", "5.24.0", None),  # none read: split_layers' default, said nowhere
])
def test_the_cut_by_release(engine, version, form):
    from kvplan.engines.stage_split import own_cut

    got = own_cut(engine, version)
    assert (got and got[0]) == form


def test_every_engine_s_oldest_cut_starts_at_release_zero():
    # own_cut takes the first row a release reaches, with no fallback: each engine's last row must reach every release
    from kvplan.engines.stage_split import CUTS, own_cut

    assert all(rows[-1][0] == (0, 0, 0) for rows in CUTS.values())
    assert own_cut("vllm", "0.0.1")[0] == "last" and own_cut("sglang", "0.0.1")[0] == "last"


@pytest.mark.parametrize("version, per_token, layers", [("0.7.3", 114_688, (52, 80)), ("0.8.0", 110_592, None)])
def test_vllm_binding_stage_follows_its_release(version, per_token, layers):
    # Llama-3.1-70B, bf16 KV at tp 1: 2 x 8 heads x 128 x 2 B = 4,096 B a layer a token. 80 over pp 3: 0.7.3 cuts
    # 26, 26, 28 (the last stage 28 x 4,096 = 114,688 B a token, and binds); 0.8.0 27, 27, 26 (27 x 4,096 = 110,592)
    plan = resolve_engine("vllm", version).result(_llama70b(), H100, Deployment(1, 3), Request(8192)).plan
    assert plan.kv_bytes_per_token_per_gpu == per_token
    assert layers is None or plan.binding_stage.layers == layers
    assert any("own split" in w.message and version in w.message for w in plan.warnings)


@pytest.mark.parametrize("version, per_token", [("0.5.5", 13_824), ("0.5.6", 9_216)])
def test_sglang_deepseek_v3_pp8_binding_stage(version, per_token):
    # DeepSeek-V3's config.json: 61 layers, MLA kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements x 2 B = 1,152 B a
    # layer a token (bf16). pp 8: SGLang 0.5.5 puts 7 x 7 + 12 (12 x 1,152 = 13,824 B on the last stage, the OOM of
    # sgl-project/sglang#13282), 0.5.6 7, 7, 7, 8, 8, 8, 8, 8 (8 x 1,152 = 9,216 B)
    model = resolve_model("deepseek-v3").spec
    res = resolve_engine("sglang", version).result(model, find_gpu("h200"), Deployment(8, 8), Request(8192))
    assert res.plan.kv_bytes_per_token_per_gpu == per_token
    assert {f.label: f.value for f in res.capacity.lines}["cell per token"] == per_token


def test_a_given_split_still_wins_and_an_even_cut_says_nothing():
    plan = _plan("vllm", "26,27,27", pp=3, version="0.7.3")  # not the 26, 26, 28 of 0.7.3's own
    assert plan.deployment.stage_layers == (26, 27, 27)
    assert not any("own split" in w.message for w in plan.warnings)
    even = resolve_engine("sglang", "0.5.5").result(_llama70b(), H100, Deployment(1, 4), Request(8192)).plan
    assert even.deployment.stage_layers is None and not any("own split" in w.message for w in even.warnings)
