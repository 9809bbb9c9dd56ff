"""Reading an SGLang start-up log: the lines each release prints about its weights, token pool and settings.

Pure text in, figures into a LogRecord (kvplan.engines.logparse detects the engine and calls `sglang_log`). Each
pattern names the release and source line that prints it, read in that release's wheel, since SGLang changed these
lines often: the K and V sizes before "#tokens" (0.4.2.post1), one "KV size" for a latent (MLA) pool, and the
scheduler's max_total_num_tokens line with or without chunked_prefill_size, or alone (the one-batch bench).
"""

from __future__ import annotations

from kvplan.core.errors import EXIT_USAGE, KvplanError
from kvplan.engines.logrecord import I, N, LogRecord, _line_end, _num
from kvplan.engines.logscan import search, findall


def sglang_log(text: str, rec: LogRecord) -> None:
    r, s = rec.reported, rec.settings
    _weights_and_pool(text, rec)
    m = search(r"Memory pool end\. avail mem=" + N + " GB", text)
    if m:
        r["avail_after_pool_gb"] = _num(m.group(1))
    _states(text, r)
    _scheduler(text, rec)
    _hicache(text, r)
    m = search(r"mem[_-]fraction[_-]static[= ]" + N, text)
    if m:
        s["mem_fraction_static"] = float(m.group(1))
        if not 0 < s["mem_fraction_static"] < 1:
            raise KvplanError(f"the log's mem_fraction_static = {m.group(1)} must be between 0 and 1", EXIT_USAGE)
    if m := search(r"ServerArgs\([^\n]*?[ ,(]quantization='?([\w-]{1,40})", text):
        s["quantization"] = m.group(1)  # server_args.py ServerArgs.quantization: the --quantization given, else None
    # "Load weight end. elapsed=0.80 s, type=Qwen2ForCausalLM, quant=awq, bits=4, ..." (and "quant=modelopt_fp4,
    # quant_algo=NVFP4"): the method the loaded model ran, with its bits or algorithm where SGLang prints them
    if m := search(r"Load weight end\.[^\n]*?, quant=([\w-]{1,40})(?:, (bits|quant_algo)=(\w{1,20}))?", text):
        s["quantization"] = m.group(3) if m.group(2) == "quant_algo" else m.group(1)
        if m.group(2) == "bits" and m.group(3).isdigit():
            s["quant_bits"] = int(m.group(3))
    m = search(r"(?:model_path='|--model(?:-path)? )([^'\s]+)", text)
    if m:
        rec.model = m.group(1)
    _sizes(text, rec)
    m = search(r"sglang(?:==|[ \t]+version[ \t]+|:v?)(\d[\w.]*)", text)
    if m:
        rec.version = m.group(1)


def _weights_and_pool(text: str, rec: LogRecord) -> None:
    """ "Load weight end ... avail mem=X GB, mem usage=Y GB." and "KV Cache is allocated. #tokens: N, K size: ...";
    before "mem usage" and "#tokens" were printed (0.4.2.post1 model_runner.py L345-349, mem_cache/memory_pool.py
    L194-196) only the free memory and the K and V sizes. A latent (MLA) pool holds one buffer and prints one size,
    "KV Cache is allocated. #tokens: N, KV size: X GB" (0.5.8.post1 wheel mem_cache/memory_pool.py L595-615,
    `_finalize_allocation_log`: a tuple from get_kv_size_bytes prints K and V, a single size "KV size";
    MLATokenToKVPool L1397-1402 returns its kv_buffer's bytes, the DSA pool L1832-1836 adds its index_k buffers)."""
    r, s = rec.reported, rec.settings
    at = text.find("Load weight end.")
    if at >= 0:
        line = text[at:_line_end(text, at)]
        arch = search(r"type=(\w+)", line)
        mem = search(r"avail mem=" + N + r" GB(?:, mem usage=" + N + " GB)?", line)
        if arch and mem:
            rec.architecture = arch.group(1)
            r["avail_after_weights_gb"] = _num(mem.group(1))
            if mem.group(2):
                r["weights_mem_usage_gb"] = _num(mem.group(2))
    head = r"KV Cache is allocated\. (?:dtype: \S+, )?#tokens: " + I
    if m := search(head + ", K size: " + N + " GB, V size: " + N + " GB", text):
        r["kv_tokens"], r["k_size_gb"], r["v_size_gb"] = _num(m.group(1)), _num(m.group(2)), _num(m.group(3))
    elif m := search(head + ", KV size: " + N + " GB", text):
        r["kv_tokens"], r["kv_size_gb"] = _num(m.group(1)), _num(m.group(2))
    elif m := search(r"KV Cache is allocated\. K size: " + N + " GB, V size: " + N + " GB", text):
        r["k_size_gb"], r["v_size_gb"] = _num(m.group(1)), _num(m.group(2))
    if m := search(r"KV Cache is allocated\. dtype: (\S+), #tokens", text):
        s["kv_cache_dtype"] = m.group(1).rstrip(",").replace("torch.", "")


def _scheduler(text: str, rec: LogRecord) -> None:
    """The scheduler's line: "max_total_num_tokens=N, chunked_prefill_size=C, max_prefill_tokens=P,
    max_running_requests=R, context_len=L" (0.4.2 on); without chunked_prefill_size before it (0.3.3 wheel
    srt/managers/scheduler.py L162-167, 0.4.0.post1 L219-224); or "max_total_num_tokens=N" alone on its line, as
    the one-batch bench prints it (0.3.3 bench_latency.py L145, 0.4.0.post1 bench_one_batch.py L130)."""
    r, s = rec.reported, rec.settings
    m = search(r"max_total_num_tokens=" + I + r", (?:chunked_prefill_size=(-?\d{1,30}), )?max_prefill_tokens=" + I
                  + r", max_running_requests=" + I + r", context_len=" + I, text)
    if m:
        r["max_total_num_tokens"], r["max_running_requests"] = _num(m.group(1)), _num(m.group(4))
        s["context_len"] = int(m.group(5))
        if m.group(2) is not None:
            s["chunked_prefill_size"] = int(m.group(2))
    elif m := search(r"(?m)^(?:\[[^\]\n]{0,60}\] )?max_total_num_tokens=" + I + r"[ \t]*$", text):
        r["max_total_num_tokens"] = _num(m.group(1))


def _hicache(text: str, r: dict) -> None:
    """HiCache's host pool (pool_host/base.py HostKVCache, kvplan.engines.sglang.offload): what it allocates per
    rank, or the refusal when the host lacks the memory."""
    m = search(r"Allocating " + N + " GB host memory for hierarchical KV cache", text)
    if m:
        r["hicache_host_gb"] = _num(m.group(1))
    m = search(r"hierarchical KV host pool: " + I + " tokens, " + N + " GB host memory", text)
    if m:
        r["hicache_host_tokens"], r["hicache_host_gb"] = _num(m.group(1)), _num(m.group(2))
    m = search(r"Not enough host memory available\. Requesting " + N + " GB but only have " + N + " GB free", text)
    if m:
        r["hicache_requested_gb"], r["hicache_free_gb"] = _num(m.group(1)), _num(m.group(2))


def _sizes(text: str, rec: LogRecord) -> None:
    """The size a setting names, else the ranks the lines are tagged with ("TP0".."TP3": 4). Only rank 0 tagged
    says nothing (SGLang prints most start-up lines from rank 0 alone): left unknown."""
    for key, tag in (("tp", "TP"), ("pp", "PP"), ("dp", "DP")):
        ranks = {int(x) for x in findall(tag + r"(?<!\w" + tag + r")(\d{1,6})[ \]]", text)}  # \bTP, fast
        m = search(r"(?:" + key + r"_size=|--" + key + r"(?:-size)? )" + I, text)
        if m:
            setattr(rec, key, int(m.group(1)))
            rec.read[key] = f"{key}_size={m.group(1)}"
        elif len(ranks) > 1 or max(ranks, default=0) > 0:
            setattr(rec, key, max(ranks) + 1)
            rec.read[key] = f"lines tagged {tag}0..{tag}{max(ranks)}"


def _states(text: str, r: dict) -> None:
    """The recurrent-state pool's line (kvplan.engines.sglang.mamba); the slot count is printed from 0.5.4."""
    m = search(r"Mamba Cache is allocated\. (?:max_mamba_cache_size: " + I + ", )?conv_state size: " + N
                  + r" ?GB, ssm_state size: " + N + " ?GB", text)
    if m:
        if m.group(1):
            r["max_mamba_cache_size"] = _num(m.group(1))
        r["conv_state_gb"], r["ssm_state_gb"] = _num(m.group(2)), _num(m.group(3))
