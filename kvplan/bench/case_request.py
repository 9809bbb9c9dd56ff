"""A corpus case's run read through its engine's request step, for the speed fit (kvplan.bench.running.running): the
engine options its flags state (OPTS, case_opts), the release it ran (case_release), the Request the engine's rules give
the case's model on one replica (case_request), and what the fit reads off that Request: whether its prefill steps
replay a CUDA graph (case_prefill_graph) and the dtype its state pool holds recurrent states in (case_ssm_dtype).
"""

from __future__ import annotations

from kvplan.core.errors import KvplanError
from kvplan.core.releases import release_of
from kvplan.engines import configure, engine_class
from kvplan.engines.scheduler import balance_iters
from kvplan.model.recurrent import recurrent_states
from kvplan.planning.deploy import Deployment
from kvplan.planning.request import read_request
from kvplan.speed.corpus import DP_ATTENTION, PREFILL_GRAPH_ON, attention_dp, prefill_graph_off, prefill_graph_on
from kvplan.speed.shape import weight_dtype_of

# the corpus's flag spellings (dashes read as underscores) that are engine options, per engine
OPTS = {
    "vllm": {"max_num_batched_tokens": "max_num_batched_tokens", "max_num_seqs": "max_num_seqs"},
    "sglang": {"chunked_prefill_size": "chunked_prefill_size", "mem_fraction_static": "mem_fraction_static",
               "mem_frac": "mem_fraction_static", "cuda_graph_max_bs": "cuda_graph_max_bs",
               "page_size": "page_size", "max_running_requests": "max_running_requests",
               "mamba_ssm_dtype": "mamba_ssm_dtype", "enable_multimodal": "enable_multimodal"},
    "trtllm": {"max_num_tokens": "max_num_tokens", "free_gpu_memory_fraction": "free_gpu_memory_fraction",
               "kv_cache_free_gpu_mem_fraction": "free_gpu_memory_fraction",
               # trtllm-serve's --kv_cache_free_gpu_memory_fraction, which serve hands to get_llm_args as
               # free_gpu_memory_fraction, into KvCacheConfig(free_gpu_memory_fraction=...)
               # (NVIDIA/TensorRT-LLM@00209af1:tensorrt_llm/commands/serve.py get_llm_args)
               "kv_cache_free_gpu_memory_fraction": "free_gpu_memory_fraction",
               # NVIDIA's MLPerf harness's name for it (its runtime flags; llmlib/config.py passes it on as
               # kv_cache_config free_gpu_memory_fraction)
               "kvcache_free_gpu_mem_frac": "free_gpu_memory_fraction"},
}


def case_prefill_graph(case, spec, gpu) -> bool:
    """Whether the case's engine replays its prefill steps from a CUDA graph, so a step with prompt tokens pays no
    launch cost per MoE layer (kvplan.speed.terms `pmoe`): its request step's `Request.prefill_graph` (SGLang's default
    piecewise or breakable prefill graph at the release the run states, for its model, GPU, pp and DP attention:
    kvplan.engines.sglang.prefill_graph.decide, the rule its memory reserve follows). False under a run that states
    --disable-piecewise-cuda-graph, for an engine without such a graph, a setting its rules refuse or a release not
    told (case_release). TensorRT-LLM's piecewise graph is off by default: True where the run turns it on with a
    capture list that reaches its step budget (kvplan.speed.corpus.prefill_graph_on) and, under attention DP, every
    rank has a context request in a context step (_every_rank_prefills), as SGLang's rule is told its DP attention."""
    if case.engine in PREFILL_GRAPH_ON:
        return prefill_graph_on(case) and _every_rank_prefills(case)
    if prefill_graph_off(case):  # the engines whose request step tells (SGLang's by release), unless a run turns it off
        return False
    told, version = case_release(case)
    got = case_request(case, spec, gpu, version, attention_dp(case)) if told else None
    return got is not None and got.prefill_graph


def _every_rank_prefills(case) -> bool:
    """Whether every attention-DP rank has a context request in a context step of the case's run, which TensorRT-LLM's
    piecewise graph needs under attention DP: each rank's can_run_piecewise_cuda_graph (num_ctx_requests != 0 and
    every rank's tokens within the largest captured count) is allgathered, and the step runs eagerly on every rank
    unless all hold (NVIDIA/TensorRT-LLM@1a0dc5f70054f66d892df6a964996fc5ead6f81e:tensorrt_llm/_torch/pyexecutor/
    model_engine.py `_get_padding_params`). True for one rank, or where attention-DP balancing holds context requests
    back until every rank has one (kvplan.engines.scheduler.balance_iters; a step its timeout releases with a rank
    empty, eager, is not priced apart); False for several ranks unbalanced, whose context steps are priced eager."""
    return case.dp <= 1 or not attention_dp(case) or balance_iters(case.engine, case.flags, True) is not None


def case_release(case) -> tuple[bool, str | None]:
    """(told, version): the run's release, else ("main branch (as stated)") the current one (None) in its era."""
    version = case.version if case.version and release_of(case.version) else None
    return version is not None or case.era == case.engine, version


def case_ssm_dtype(case, spec, gpu) -> str:
    """The dtype the case's engine, with the options the run stated, holds `spec`'s recurrent states in: its request
    step's `Request.ssm_dtype` (SGLang's pool: --mamba-ssm-dtype, else float32 or, from 0.5.9, the config's,
    kvplan.engines.sglang.mamba.pool_ssm_dtype), the one a plan's speed figures read; "" for a model without
    recurrent states, an engine whose fit keeps the reader's (`Engine.fit_follows_ssm_dtype`: vLLM, whose release
    rule failed the adoption rule), a setting its rules refuse or a release not told (case_release)."""
    if spec is None or case.engine not in OPTS or not recurrent_states(spec.layers):
        return ""
    told, version = case_release(case)  # no request to build for an engine whose fit keeps the reader's
    got = case_request(case, spec, gpu, version) if told and engine_class(case.engine).fit_follows_ssm_dtype else None
    return got.ssm_dtype if got is not None else ""


def case_request(case, spec, gpu, version: str | None, dp_attention: bool = False):
    """The Request the request step of the case's engine at `version`, configured with the options its run stated,
    gives `spec` at the run's prompt length on one replica of the case's layout, or None where the engine's rules refuse
    the setting: what case_ssm_dtype and case_prefill_graph read. `dp_attention`: the run's DP attention told to the
    engine as its option (kvplan.speed.corpus.DP_ATTENTION), its dp ranks one engine's."""
    opts = {**case_opts(case), DP_ATTENTION[case.engine]: True} if dp_attention else case_opts(case)
    try:
        engine, _ = configure(case.engine, version, opts, None)
        dep = engine.deployment(Deployment(tp=case.tp, pp=case.pp, dp=case.dp if dp_attention else 1, ep=case.ep))
        req = read_request(spec, context=max(1, int(case.load.isl)), kv_dtype=case.kv_dtype or "auto",
                           weight_dtype=weight_dtype_of(case.weight_dtype))
        return engine.request(req, engine.settings(spec, gpu, dep, req), spec, dep)
    except KvplanError:
        return None


def case_opts(case) -> dict:
    """The engine options the case's flags state (OPTS), in the engine's own names."""
    flags = case.flags or {}
    return {opt: flags[k] for k, opt in OPTS[case.engine].items() if flags.get(k) is not None}
