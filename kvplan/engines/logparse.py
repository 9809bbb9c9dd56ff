"""Reading engine start-up logs: which engine, which model and settings, and every number it printed.

Pure text in, a LogRecord out. The patterns are the log lines each engine prints (docs/engines.md
sections 1.5, 2.4 and 4.5 name the source line of each); numbers keep the decimals they were
printed with, so the reconciliation can say which true values a rounded figure allows.
"""

from __future__ import annotations

import re

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.logdates import written
from kvplan.engines.lognodes import read_nodes
from kvplan.engines.logparse_graphs import vllm_graph_settings
from kvplan.engines.logparse_sglang import sglang_log
from kvplan.engines.logscan import search, findall
from kvplan.engines.vllm.releases import FLOORS
from kvplan.engines.logrecord import (  # noqa: F401 (re-exported: callers import the record's names from here too)
    C, I, MAX_FIGURE, MAX_LAYERS, N, LogRecord, Num, _check_figures, _int, _line_end, _num, deployment_said,
)


def detect_engine(text: str) -> str | None:
    if "[TensorRT-LLM]" in text:
        return "trtllm"
    if search(r"KV Cache is allocated|Load weight end|sglang|hierarchical KV|hierarchical cache", text):
        return "sglang"
    if search(r"llama_kv_cache|llama_new_context|llama_context:|llama_model_load|kv self size|KV self size|"
                 r"llama_init_from|print_info:", text):
        return "llama.cpp"
    if search(r"vLLM|vllm|GPU KV cache size|GPU blocks|Available KV cache memory|Model loading took|"
                 r"Loading model weights took|Maximum concurrency for|stored in KV cache \(|"
                 r"kv cache memory in use is|available KV cache memory \(", text):
        return "vllm"
    return None


_first = search  # the first match of a pattern in the log (kvplan.engines.logscan)


def fixture_meta(text: str) -> dict[str, str]:
    """`#kvplan: model=X gpu=Y` header lines of a test fixture (what the issue stated beside the log)."""
    meta: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#kvplan:"):
            for item in line[8:].split():
                k, _, v = item.partition("=")
                meta[k] = v
    return meta


def parse_log(text: str) -> LogRecord:
    text = "\n".join(l for l in text.splitlines() if not l.startswith(("#|", "#kvplan:")))
    engine = detect_engine(text)
    if engine is None:
        raise KvplanError("not a vLLM, SGLang, TensorRT-LLM or llama.cpp start-up log (no line kvplan recognises)",
                          EXIT_USAGE)
    rec = LogRecord(engine)
    {"vllm": _vllm, "sglang": sglang_log, "llama.cpp": _llamacpp, "trtllm": _trtllm}[engine](text, rec)
    read_nodes(text, rec)  # the nodes it ran on, where it says (kvplan.engines.lognodes)
    rec.written = written(text)  # the log's own clock: a bound on its release where it prints none
    if not rec.reported:
        raise KvplanError(f"found {engine} lines but no KV-cache figures to check", EXIT_USAGE)
    _check_figures(rec)
    return rec


def _vllm_sizes(text: str, rec: LogRecord) -> None:
    """The tensor- and pipeline-parallel sizes from vLLM's engine-args dump or the serve command line
    (DeepSeek-V3#205: `--tensor-parallel-size 8 --pipeline-parallel-size 4` over Ray), and where each was read."""
    for key, name in (("tp", "tensor"), ("pp", "pipeline")):
        m = _first(name + r"[_-]parallel[_-]size['\"]?[=:]?[ \t]*" + I, text)
        setattr(rec, key, int(m.group(1)) if m else None)
        if m:
            rec.read[key] = f"{name}_parallel_size={m.group(1)}"
    # the layers per stage the command line sets (VLLM_PP_LAYER_PARTITION=16,32 before `vllm serve`, vllm#34076;
    # kvplan.engines.stage_split), checked against the model where the log is planned
    m = _first(r"VLLM_PP_LAYER_PARTITION=['\"]?(\d{1,6}(?:,\d{1,6}){0,4095})\b", text)
    if m:
        rec.stage_layers = tuple(int(x) for x in m.group(1).split(","))
        rec.read["stage_layers"] = f"VLLM_PP_LAYER_PARTITION={m.group(1)}"


def _vllm_kernels(text: str, s: dict) -> None:
    """What a vLLM log says it chose where it moves its memory: the weights' quantization method (issue 22), the
    sampler and the MXFP4 MoE backend."""
    # the engine-config line prints the resolved method (V1 "Initializing a V1 LLM engine (v..) with config:",
    # V0 "Initializing an LLM engine", vllm-project/vllm@1473f74:vllm/engine/llm_engine.py LLMEngine.__init__):
    # model_config.quantization, filled from the checkpoint's quantization_config
    m = _first(r"Initializing an? (?:V1 )?LLM engine[^\n]*?[ ,]quantization=([\w-]{1,40})", text)
    stated = m.group(1) if m else _asked_quantization(text)
    if stated:
        s["quantization"] = stated
    if "top-p & top-k sampling" in text:  # topk_topp_sampler.py: which sampler the profile's dummy run took
        s["flashinfer_sampler"] = "Using FlashInfer for top-p & top-k sampling" in text
    elif search(r"FlashInfer top-p/top-k sampling (?:unavailable|disabled)", text):  # 0.29.0 L46-49, L69-72
        s["flashinfer_sampler"] = False
    # quantization/mxfp4.py: the MXFP4 MoE kernel it chose (marlin_utils_fp4.py's warning: Marlin; 0.10.1
    # logs no choice)
    # config/vllm.py use_v2_model_runner (0.22.0+; kvplan.engines.vllm.runner): the run fell back to the V1 runner
    m = _first(r"Model runner v2 (requires Triton|does not yet support [^\n]{1,200}?); using the v1 model runner",
               text, re.I)
    if m:
        s["runner_fallback"] = m.group(1)
    m = _first(r"\[mxfp4\.py:\d+\] Using (Triton|Marlin|FlashInfer MXFP4)", text)
    if m or "[marlin_utils_fp4.py:" in text:
        s["mxfp4_backend"] = m.group(1).split()[0].lower() if m else "marlin"


def _asked_quantization(text: str) -> str | None:
    """The quantization a vLLM run asked for where the log prints no engine-config line (an online `--quantization
    fp8` on a bf16 checkpoint, vllm-project/vllm#35289): the "non-default args" dict vLLM logs at start-up
    (log_non_default_args, vllm-project/vllm@00fc8809:vllm/entrypoints/utils.py), else the command line's
    `--quantization` (or its alias `-q` on a line that starts vLLM: `--model`, `vllm serve`; EngineArgs.add_cli_args,
    vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py). None where neither states one."""
    m = _first(r"non-default args: \{[^\n]*?'quantization': '([\w-]{1,40})'", text)
    if m:
        return m.group(1)
    m = _first(r"(?:^|\s)--quantization(?:=|[ \t]+)([\w-]{1,40})", text)
    if m:
        return m.group(1)
    m = _first(r"^(?=[^\n]*(?:--model|vllm serve))[^\n]*[^\S\n]-q(?:=|[ \t]+)([\w-]{1,40})", text, re.M)
    return m.group(1) if m else None


# The figures a vLLM log reports, each the first match of its pattern (one line each, linear in the log).
_VLLM_REPORTED = (
    ("model_loading_gib", r"Model loading took " + N + r" GiB|Loading model weights took " + N + " GB"),
    ("available_kv_gib", r"Available KV cache memory: " + N + r" GiB|kv_cache_size=" + N + "GiB"),
    ("gpu_blocks", r"# GPU blocks: " + I + r"|GPU blocks: " + I + r"|num_gpu_blocks is: " + I),
    ("cpu_blocks", r"# CPU blocks: " + I),
    ("kv_cache_tokens", r"GPU KV cache size: " + C + r" tokens|stored in KV cache \(" + I + r"\)"),
    ("non_torch_gib", r"non_torch_memory=" + N + "GiB"),
    ("peak_torch_gib", r"peak_torch_memory=" + N + "GiB"),
)


def _vllm(text: str, rec: LogRecord) -> None:
    r, s = rec.reported, rec.settings
    _vllm_kernels(text, s)
    for pat in (r"vLLM API server version (\S+)", r"LLM engine \(v(\d[\w.+-]*)\)", r"█[ \t]+version (\d[\w.+-]*)"):
        m = _first(pat, text)
        if m:
            rec.version = m.group(1)
            break
    for pat in (r"model='([^'\n]+)'", r"'model': '([^'\n]+)'", r"█[ \t]+model[ \t]+(\S+)", r"vllm serve (\S+)",
                r"Starting to load model (\S+?)\.\.\.", r"--model[= ](\S+)"):
        m = _first(pat, text)
        if m:
            rec.model = m.group(1)
            break
    _vllm_sizes(text, rec)
    for key, pat in (("gpu_memory_utilization", r"gpu[_-]memory[_-]utilization['\"]?[=: \t]+" + N),
                     ("kv_cache_dtype", r"kv[_-]cache[_-]dtype['\"]?[=: \t]+'?(\w+)"),
                     ("block_size", r"'block_size': " + I + r"|block[_-]size[= ]" + I),
                     ("max_model_len", r"max_seq_len=" + I + r"|'max_model_len': " + I + r"|Using max model len "
                                       + I + r"|max[_-]model[_-]len[= ]" + I),
                     ("max_num_batched_tokens", r"max[_-]num[_-]batched[_-]tokens['\"]?[=: \t]+" + I),
                     ("total_gpu_memory_gib", r"total_gpu_memory=" + N + "GiB")):
        m = _first(pat, text)
        if m:
            val = next(g for g in m.groups() if g is not None)
            s[key] = val if key == "kv_cache_dtype" else (_num(val) if "." in val else int(val))
    for key, pat in _VLLM_REPORTED:
        m = _first(pat, text)
        if m:
            r[key] = _num(next(g for g in m.groups() if g is not None))
    at = text.find("Graph capturing finished in ")
    m = search("took " + N + " GiB", text[at:_line_end(text, at)]) if at >= 0 else None
    if m:
        r["cudagraph_gib"] = _num(m.group(1))
    m = _first(r"Maximum concurrency for " + C + r" tokens per request: " + N + "x", text)
    if m:
        r["max_concurrency"] = _num(m.group(2))
        s.setdefault("max_model_len", _int(m.group(1)))
    if "max_model_len" not in s:
        m = _first(r"max seq len \(" + I + r"\)", text)
        if m:
            s["max_model_len"] = int(m.group(1))
    m = _first(r"SpeculativeConfig\(method='(\w+)', model=(?:'([^'\n]{1,300})'|None), num_spec_tokens=" + I, text)
    if m:  # SpeculativeConfig.__repr__ (vllm/config/speculative.py v0.11.0 L564-568, v0.33.0 L2196-2210)
        method, draft, n = m.group(1), m.group(2), m.group(3)
        s["speculative"] = f"draft:{draft}:{n}" if method == "draft_model" else f"{method}:{n}"
    _vllm_budget_terms(text, rec)
    rec.floor = next(((v, why) for line, v, why in FLOORS if line in text), None)
    if search(r"Memory profiling results|# CPU blocks", text):
        rec.era = "v0"
    elif search(r"# GPU blocks: |Loading model weights took", text):
        rec.era = "v1-early"  # V1 before "GPU KV cache size" (v0.7.x)
    else:
        rec.era = "v1"


def _llamacpp(text: str, rec: LogRecord) -> None:
    r, s = rec.reported, rec.settings
    for key, pat in (("kv_size", r"kv_size = " + I), ("n_ctx", r"\bn_ctx[ \t]+=[ \t]+" + I),
                     ("n_layer", r"\bn_layer[ \t]*=[ \t]*" + I), ("n_embd", r"\bn_embd[ \t]+=[ \t]+" + I),
                     ("n_ctx_slot", r"n_ctx_slot = " + I), ("n_seq_max", r"n_seq_max[ \t]*=[ \t]*" + I),
                     ("n_embd_k_gqa", r"print_info: n_embd_k_gqa[ \t]*=[ \t]*" + I),
                     ("n_embd_v_gqa", r"print_info: n_embd_v_gqa[ \t]*=[ \t]*" + I)):
        m = _first(pat, text)
        if m:
            s[key] = int(m.group(1))
    m = _first(r"type_k = '(\w+)', type_v = '(\w+)'", text)
    if m:
        s["type_k"], s["type_v"] = m.group(1), m.group(2)
    rec.layers = [(int(k), int(v)) for _, k, v in
                  findall(r"layer[ \t]+" + I + ": n_embd_k_gqa = " + I + ", n_embd_v_gqa = " + I, text)]
    m = _first(r"kv self size[ \t]*=[ \t]*" + N + " MB", text)
    if m:
        r["kv_self_mib"] = _num(m.group(1))
        rec.era = "2023"
    m = _first(r"KV self size[ \t]*=[ \t]*" + N + r" MiB, K \((\w+)\):[ \t]*" + N + r" MiB, V \((\w+)\):[ \t]*" + N
               + " MiB", text)
    if m:
        r["kv_self_mib"], r["k_mib"], r["v_mib"] = _num(m.group(1)), _num(m.group(3)), _num(m.group(5))
        s.setdefault("type_k", m.group(2))
        s.setdefault("type_v", m.group(4))
        rec.era = "2024"
    m = _first(r"size =[ \t]*" + N + r" MiB \([ \t]*" + I + r" cells,[ \t]*" + I + r" layers,[ \t]*" + I
               + r"(?:/" + I + r")? seqs\), K \((\w+)\):[ \t]*" + N + r" MiB, V \((\w+)\):[ \t]*" + N + " MiB", text)
    if m:
        r["kv_self_mib"], r["k_mib"], r["v_mib"] = _num(m.group(1)), _num(m.group(7)), _num(m.group(9))
        r["cells"] = _num(m.group(2))
        s["n_layer_kv"], s["n_seq_max"] = int(m.group(3)), int(m.group(4))
        s["n_stream"] = int(m.group(5) or 1)
        s.setdefault("type_k", m.group(6))
        s.setdefault("type_v", m.group(8))
        rec.era = "2025"
    bufs = findall(r"(?<!\w)(\w{1,64}) KV buffer size =[ \t]*" + N + " MiB", text)
    for dev, mib in bufs:
        r[f"kv_buffer_{dev}_mib"] = _num(mib)


# Each line that splits vLLM's start-up budget into its terms, as the releases print it (all on one
# line, so every pattern is anchored on its own literal text and matched once: linear in the log).
_BUDGET_TERMS = (
    # v0.6.4-v0.10 worker.py / gpu_worker.py: "model weights take 7.63GiB; non_torch_memory takes 0.08GiB;
    # PyTorch activation peak memory takes 1.40GiB; the rest of the memory reserved for KV Cache is 12.10GiB."
    ("weights_gib", r"model weights take ([\d.]+) ?GiB"),
    ("non_torch_gib", r"non_torch_memory takes ([\d.]+) ?GiB"),
    ("activation_peak_gib", r"PyTorch activation peak memory takes ([\d.]+) ?GiB"),
    ("available_kv_gib", r"reserved for KV Cache is (-?[\d.]+) ?GiB"),
    ("total_gpu_memory_gib", r"total_gpu_memory \(([\d.]+) ?GiB\)"),
    # v0.11+ DEBUG gpu_worker.py: "Total non KV cache memory: 17.73GiB; torch peak memory increase:
    # 2.21GiB; non-torch forward increase memory: 0.25GiB; weights memory: 15.27GiB."
    ("activation_peak_gib", r"torch peak memory increase: ([\d.]+) ?GiB"),
    ("non_torch_gib", r"non-torch forward increase memory: ([\d.]+) ?GiB"),
    ("weights_gib", r"; weights memory: ([\d.]+) ?GiB"),
    ("non_kv_gib", r"Total non KV cache memory: ([\d.]+) ?GiB"),
    ("total_gpu_memory_gib", r"memory snapshot: .{0,200}?total_memory=([\d.]+) ?GiB"),
    # the estimate is a sum of free-memory differences (gpu_model_runner.py v0.20.0 L5990-6045): negative where free
    # memory rose during a capture, as on a unified GPU (docs/engines.md 1.2c)
    ("cudagraph_estimate_gib", r"Estimated CUDA graph memory: (-?[\d.]+) GiB"),
    ("cudagraph_gib", r"Graph capturing finished in .{0,40}?took (-?[\d.]+) GiB"),
    ("available_kv_gib", r"Available KV cache memory: (-[\d.]+) GiB"),
    ("gpu_blocks", r"# (?:cuda|CUDA) blocks: (\d+)"),
    # v0.2x gpu_worker.py summary: "Free memory on device (30.27/31.4 GiB) on startup. Desired GPU memory
    # utilization is (0.92, 28.88 GiB). Actual usage is 15.03 GiB for consumed memory (weights +
    # non-torch), 1.59 GiB for peak activation, and 0.09 GiB for CUDAGraph memory. ... Current kv
    # cache memory in use is 12.26 GiB." (numbers before their label: quantifiers bounded)
    ("available_kv_gib", r"Current kv cache memory in use is ([\d.]+) GiB"),
    ("activation_peak_gib", r" ([\d.]{1,12}) GiB for peak activation"),
    ("cudagraph_gib", r" ([\d.]{1,12}) GiB for CUDAGraph memory"),
    ("weights_non_torch_gib", r" ([\d.]{1,12}) GiB for consumed memory \(weights \+ non-torch\)"),
    ("total_gpu_memory_gib", r"Free memory on device \([\d.]{1,12}/([\d.]{1,12}) GiB\)"),
    ("cudagraph_estimate_gib", r"CUDA graph pool memory: [\d.]{1,12} GiB \(actual\), ([\d.]{1,12}) GiB \(estimated\)"),
    # v0.11+ kv_cache_utils.py when one request does not fit: "... (24.0 GiB KV cache is needed, which is
    # larger than the available KV cache memory (3.18 GiB). Based on the available memory, the
    # estimated maximum model length is 34736."
    ("available_kv_gib", r"available KV cache memory \((-?[\d.]{1,12}) GiB\)"),
    ("kv_needed_gib", r"\(([\d.]{1,12}) GiB KV cache is needed"),
    ("estimated_max_model_len", r"estimated maximum model length is (\d+)"),
)


def _vllm_budget_terms(text: str, rec: LogRecord) -> None:
    """The budget's terms where the log prints them (first value wins; earlier keys are kept)."""
    r, s = rec.reported, rec.settings
    snap = search(r"memory snapshot: .{0,200}?non_torch_memory=([\d.]+) ?GiB", text)
    if snap:
        # v0.11+ "worker init memory snapshot: ... non_torch_memory=0.51GiB" is the CUDA context before
        # loading, not the budget's term (the "non-torch forward increase" below is): keep it apart.
        r["init_non_torch_gib"] = _num(snap.group(1))
        if r.get("non_torch_gib") is not None and r["non_torch_gib"].text == snap.group(1):
            del r["non_torch_gib"]
    for key, pat in _BUDGET_TERMS:
        if key in r:
            continue
        m = search(pat, text)
        if m:
            r[key] = _num(m.group(1))
    if "activation_peak_gib" in r and not search(r"PyTorch activation peak memory takes|torch peak memory increase:",
                                                    text):
        s["peak_from_summary"] = True  # the closing line's figure (kvplan.engines.vllm.reconcile: 0.27+ adds graphs)
    if "total_gpu_memory_gib" in r:
        s.setdefault("total_gpu_memory_gib", r["total_gpu_memory_gib"])
    m = search(r"gpu_memory_utilization \(([\d.]+)\)|Desired GPU memory utilization is \(([\d.]{1,12}),", text)
    if m and "gpu_memory_utilization" not in s:
        s["gpu_memory_utilization"] = _num(next(g for g in m.groups() if g is not None))
    m = search(r"Defaulting max_num_seqs to (\d+)|max[_-]num[_-]seqs['\"]?(?:[=:]|[^\S\n])+(\d+)", text)
    if m:
        s.setdefault("max_num_seqs", int(next(g for g in m.groups() if g is not None)))
    vllm_graph_settings(text, rec)  # the settings that size the budget's CUDA-graph term (logparse_graphs)


def _trtllm(text: str, rec: LogRecord) -> None:
    """TensorRT-LLM's KV lines: the C++ runtime ("Allocate N bytes for k/v cache", "Using N tokens in
    paged KV cache", v0.5-v0.9) and the executor ("[MemUsageChange] Allocated X GiB for max tokens in
    paged KV cache (N)", "tokens per block=32, primary blocks=N"); the PyTorch backend's estimation run (peak,
    available KV, "Estimated max tokens"), KVCacheManager's "Both free_gpu_memory_fraction and max_tokens are set
    (to F and N, ...)" and the executor's "max_seq_len=, max_num_requests=, max_num_tokens=" settings."""
    r = rec.reported
    for key, pat in (("kv_bytes", r"Allocate (\d+) bytes for k/v cache"),
                     ("kv_tokens", r"Using (\d+) tokens in paged KV cache"),
                     ("kv_gib", r"Allocated ([\d.]+) GiB for max tokens in paged KV cache"),
                     ("max_tokens", r"for max tokens in paged KV cache \((\d+)\)"),
                     ("tokens_per_block", r"(?:tokens per block=|Number of tokens per block: )(\d+)"),
                     ("primary_blocks", r"primary blocks=(\d+)"),
                     ("engine_mib", r"Loaded engine size: (\d+) MiB"),
                     # the PyTorch backend's estimation run (KvCacheCreator / estimate_max_kv_cache_tokens)
                     ("peak_gib", r"Peak memory during memory usage profiling \(torch \+ non-torch\): ([\d.]+) GiB"),
                     ("available_kv_gib", r"available KV cache memory when calculating max tokens: ([\d.]+) GiB"),
                     ("weights_gib", r"Memory used after loading model weights \(inside torch\)[^:\n]*: ([\d.]+) GiB"),
                     ("activation_gib",
                      r"Memory dynamically allocated during inference \(inside torch\)[^:\n]*: ([\d.]+) GiB"),
                     ("non_torch_gib",
                      r"Memory used outside torch \(e\.g\., NCCL and CUDA graphs\)[^:\n]*: ([\d.]+) GiB"),
                     ("estimated_max_tokens", r"Estimated max tokens in KV cache : (\d+)"),
                     ("estimated_kv_gib", r"Estimated max memory in KV cache : ([\d.]+) GiB"),
                     # KVCacheManager.calculate_max_num_blocks: "(to FRACTION and MAX_TOKENS, respectively)"
                     ("fraction_set", r"Both free_gpu_memory_fraction and max_tokens are set \(to ([\d.]+) and"),
                     ("max_tokens_set", r"Both free_gpu_memory_fraction and max_tokens are set \(to [\d.]+ and (\d+)")):
        m = search(pat, text)
        if m:
            r[key] = _num(m.group(1))
    s = rec.settings
    m = search(r"max_seq_len=(\d+), max_num_requests=(\d+), max_num_tokens=(\d+)", text)
    if m:
        s["max_seq_len"], s["max_batch_size"], s["max_num_tokens"] = (int(g) for g in m.groups())
    _trtllm_context(text, rec)


def _trtllm_context(text: str, rec: LogRecord) -> None:
    """What a TensorRT-LLM log says about its run besides the pool's figures: the release ("[TensorRT-LLM]
    TensorRT-LLM version: 0.20.0", TensorRT-LLM#6294's second paste), the model (the `trtllm-serve MODEL` /
    `--model` command line, or the Hugging Face cache folder it loads from, `models--ORG--NAME/snapshots`), the
    tensor- and pipeline-parallel sizes (trtllm-serve's tp_size / pp_size flags, `tp_size=N`, `tensor_parallel_size=N`,
    `pipeline_parallel_size=N`: LlmArgs' names, NVIDIA/TensorRT-LLM@00209af1 commands/serve.py get_llm_args), and
    KVCacheManager's blocks a sequence may hold with its window ("Max KV cache blocks per sequence: 65 [window
    size=2051]",
    0.20's "Max KV cache pages per sequence: 5 [window size=157]"; from 1.x also "max sequence length=N")."""
    r, s = rec.reported, rec.settings
    m = search(r"TensorRT-LLM version: (\d[\w.+-]{0,40})", text)
    if m:
        rec.version = m.group(1)
    for pat in (r"models--([\w.-]{1,96})--([\w.-]{1,96})/snapshots", r"trtllm-serve (?:serve )?([\w./-]{1,200})",
                r"--model[= ]([\w./-]{1,200})"):
        m = search(pat, text)
        if m and not m.group(1).startswith("-"):
            rec.model = "/".join(m.groups())
            break
    for key, pat in (("tp", r"(tp_size[= ]|tensor_parallel_size=)"), ("pp", r"(pp_size[= ]|pipeline_parallel_size=)")):
        m = search(pat + I, text)  # trtllm-serve's --tp_size / --pp_size too (commands/serve.py get_llm_args)
        if m:
            setattr(rec, key, int(m.group(2)))
            rec.read[key] = f"{m.group(1).strip('= ')}={m.group(2)}"
    m = search(r"Max KV cache (?:blocks|pages) per sequence: " + I + r" \[window size=" + I + r"\]", text)
    if m:
        r["blocks_per_seq"] = _num(m.group(1))
        s["window_size"] = int(m.group(2))
    m = search(r"max sequence length=" + I, text)
    if m:
        s.setdefault("max_seq_len", int(m.group(1)))
