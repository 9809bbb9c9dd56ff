"""vLLM's non-KV memory per GPU, term by term, modelled from the engine's source and calibrated on logs.

vLLM sizes the KV cache as `total x gpu_memory_utilization - weights - torch peak increase of the
profile run - non-torch increase` (`vllm/v1/worker/gpu_worker.py` determine_available_memory, v0.11.0
L222-300; v0.19.0 prints each term at DEBUG: "Total non KV cache memory: ...; torch peak memory
increase: ...; non-torch forward increase memory: ...; weights memory: ..."), minus the CUDA-graph
estimate where the release subtracts it (`vllm/engines/vllm.py` Settings.cudagraphs). This module
models the three non-weight terms; `overhead_terms` is the one entry point (vllm.overhead calls it).

1. Activation peak (`gpu_model_runner.py` profile_run, v0.11.0-v0.19.0): one dummy forward pass of
   `max_num_batched_tokens` tokens (T), then `_dummy_sampler_run` over the last hidden state of each of
   min(max_num_seqs, T) requests (S): fp32 logits of S x vocab (gathered whole on every tensor-parallel
   rank), their softmax / top-k-top-p buffers and the sampled-token bookkeeping. Modelled as
       peak = SAMPLER x S x vocab + FORWARD_MLP x T x width/tp + FORWARD_HIDDEN x T x hidden
   (bytes per element of each product). Pipeline stages before the last run no sampler. The legacy V0
   engine (< 0.8, eager, T = max_model_len without chunked prefill) keeps the planner's eager form.
2. Non-torch increase (CUDA/NCCL allocations outside PyTorch during the profile run): a constant
   for one GPU, larger with tensor parallelism (custom all-reduce and NCCL buffers) and with pipeline
   parallelism alone.
3. CUDA graphs (`gpu_model_runner.py` v0.19.0 "Estimated CUDA graph memory: X GiB total", subtracted
   from v0.20.0 unless --enforce-eager): a base plus a per-decoder-layer cost on the rank.

The constants were fitted by `benchmarks/budget_corpus.py --calibrate` on the TRAINING split of the
log corpus (tests/fixtures/logs/corpus/index.yaml; split by source, never by record) and are checked
against the held-out split by the same benchmark; tests/test_budget_corpus.py re-fits them and fails
if these values drift from what the training split gives.
"""

from __future__ import annotations

from kvplan.engines import parse_version

GIB = 2**30
MIB = 2**20

# --- calibrated on the training split (benchmarks/budget_corpus.py --calibrate) --------------------
SAMPLER_BYTES = 14.33  # per logit of the dummy sampler run (S x vocab)
FORWARD_MLP_BYTES = 0.59  # per token x MLP width / tp of the profile forward pass
FORWARD_HIDDEN_BYTES = 3.62  # per token x hidden size of the profile forward pass
NON_TORCH_SINGLE = 246 * MIB  # one GPU
NON_TORCH_TP = 2156 * MIB  # tensor parallel > 1 (custom all-reduce + NCCL buffers)
NON_TORCH_TP_LEGACY = 136 * MIB  # tensor parallel > 1 before 0.19 (residual of the printed budget)
NON_TORCH_PP = NON_TORCH_SINGLE  # pipeline parallel only: no training record; no all-reduce buffers
CUDAGRAPH_BASE = 21 * MIB  # CUDA-graph estimate: first capture, pools
CUDAGRAPH_PER_LAYER = 23 * MIB  # per decoder layer on the rank

# --- the legacy V0 engine (< 0.8): smaller profile, the same sampler form ---------------------------
V0_NON_TORCH_SINGLE = 160 * MIB  # 0.08-0.26 GiB printed by v0.6.4-v0.7 "non_torch_memory takes"


def activation_peak(model, tp: int, tokens: int, max_seqs: int, last_stage: bool = True,
                    version: tuple[int, ...] = (0, 19, 0)) -> int:
    """Torch peak increase of vLLM's profile run on one rank (bytes)."""
    if version < (0, 8, 0):
        # V0 runs the profile forward eagerly: the MLP's gate+up output (2 x width), its activation and
        # four hidden-size buffers in 16 bits stay live (kvplan.planner.activation_estimate), which the
        # V1 compiled graph fuses away; the V1 constants below were fitted on V1 logs only.
        from kvplan.planner import activation_estimate

        return activation_estimate(model, tp, tokens=tokens, max_seqs=max_seqs)
    seqs = min(max_seqs, tokens)
    sampler = SAMPLER_BYTES * seqs * model.vocab_size if last_stage else 0
    forward = tokens * (FORWARD_MLP_BYTES * model.intermediate_size / tp + FORWARD_HIDDEN_BYTES * model.hidden_size)
    return int(sampler + forward)


def non_torch(tp: int, pp: int, version: tuple[int, ...]) -> int:
    if version < (0, 8, 0):
        return V0_NON_TORCH_SINGLE if tp == 1 and pp == 1 else NON_TORCH_TP
    if tp > 1:
        # v0.19.0 logs "Initialized FlashInfer All Reduce workspace" on every tp > 1 rank and its
        # non-torch increase is ~2.1 GiB; v0.10.1 logs imply a few hundred MiB. Releases between the
        # two are not in the corpus: 0.19 is taken as the step.
        return NON_TORCH_TP if version >= (0, 19, 0) else NON_TORCH_TP_LEGACY
    return NON_TORCH_PP if pp > 1 else NON_TORCH_SINGLE


def cudagraph_estimate(layers_on_rank: int) -> int:
    """vLLM's "Estimated CUDA graph memory" for one rank (bytes), whether or not it is subtracted."""
    return CUDAGRAPH_BASE + CUDAGRAPH_PER_LAYER * layers_on_rank


def overhead_terms(model, dep, st) -> dict[str, int]:
    """The per-GPU terms vLLM subtracts besides the weights, for the rank with the least KV room.

    `st` is vllm.Settings (version, max_num_batched_tokens, max_num_seqs, cudagraphs). The last
    pipeline stage runs the sampler, so it is the one modelled.
    """
    from kvplan.planner import split_layers

    v = parse_version(st.version)
    layers = max(b - a for a, b in split_layers(model.num_layers, dep.pp))
    act = activation_peak(model, dep.tp, st.max_num_batched_tokens, st.max_num_seqs, version=v)
    graphs = cudagraph_estimate(layers) if st.cudagraphs else 0
    return {"activation_peak": act, "non_torch": non_torch(dep.tp, dep.pp, v), "cudagraphs": graphs}
