"""What a serving process holds beside its weights and KV cache, as kvplan estimates it where an engine has no rule
of its own: the profiling pass's activations, the CUDA context and NCCL; and the experts a decode step touches.
kvplan.planning.plan re-exports these names.
"""

from __future__ import annotations

from kvplan.model.spec import ModelSpec
from kvplan.planning.deploy import Deployment

DEFAULT_MAX_BATCHED_TOKENS = 8192  # vLLM v1 default chunked-prefill budget for its profiling run
DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default max running sequences (logits of the profiling run)
NON_TORCH_BYTES = 160 * 2**20  # non-torch memory at tp=1: 0.14 GiB in a vLLM 0.11 H100 log (shared/engine_logs.yaml)
NCCL_BYTES = 512 * 2**20  # added for tp or pp > 1: NCCL buffers and communicators (an estimate)


def expected_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts a decode step of `tokens` tokens reads in one MoE layer, under uniform routing.

    Each expert is missed by one token with probability 1 - k/E, so by all with (1 - k/E)^tokens.
    """
    if not num_experts or not top_k:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def activation_estimate(model: ModelSpec, tp: int, tokens: int = DEFAULT_MAX_BATCHED_TOKENS,
                        max_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """Peak activation memory of an engine's profiling forward pass, per rank (an estimate).

    A prefill chunk of `tokens` tokens materialises the MLP's gate+up output (2 x width) and its
    activation (1 x width) in 16 bits, a few hidden-size buffers (residual, normed input, attention
    output, q/k/v), and fp32 logits for up to `max_seqs` sampled sequences. For the vLLM 0.11 log of
    Mistral-Small-24B on an H100 this gives 1.94 GiB against the 2.12 GiB vLLM measured.
    """
    width = model.intermediate_size // tp
    per_token = (3 * width + 4 * model.hidden_size) * 2
    logits = min(tokens, max_seqs) * model.vocab_size * 4 // tp
    return tokens * per_token + logits


def runtime_bytes(dep: Deployment) -> int:
    """Non-torch memory of a serving process: the CUDA context, plus NCCL when ranks talk."""
    return NON_TORCH_BYTES + (NCCL_BYTES if dep.gpus > 1 else 0)


def overhead_estimate(model: ModelSpec, dep: Deployment) -> int:
    return activation_estimate(model, dep.tp) + runtime_bytes(dep)
