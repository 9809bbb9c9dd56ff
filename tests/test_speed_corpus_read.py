"""How the speed corpus reader takes a run's TPOT and SGLang's DP-attention layout (kvplan.speed.corpus)."""

from pathlib import Path

import pytest

from kvplan.model.weights import weight_bytes
from kvplan.sources.catalog import find_in_catalog
from kvplan.speed.corpus import case_of, in_training, read_corpus, targets
from kvplan.speed.fit import Built, fp8_context_fmha
from conftest import speed_cases

CORPUS = Path(__file__).parent / "fixtures" / "speed"


def test_tpot_is_the_mean_itl_where_the_run_printed_both():
    # GPUStack Performance Lab, GLM-4.5 on 8 x H100, SGLang, ShareGPT, 1,000 prompts
    # (gpustack/gpustack@...:docs/performance-lab/glm-4.5/h100.md,
    # tests/fixtures/speed/gpustack-perflab-glm-4x-h100.yaml):
    # "Mean TPOT (ms): 684.1", "Mean ITL (ms): 208.76". kvplan's TPOT is decode time over decode tokens, the pooled
    # mean gap: 208.76 ms = 0.20876 s, not the per-request average 0.6841 s (3.3x: ShareGPT's short outputs).
    t = targets({"tpot_ms": {"mean": 684.1, "median": 252.95}, "itl_ms": {"mean": 208.76, "median": 129.94}}, 8)
    assert t["tpot"] == pytest.approx(0.20876)


def test_tpot_stays_where_a_chunk_carries_several_tokens():
    # a mean ITL above the mean TPOT: each gap is a chunk's (speculative decoding, a stream interval), not a token's;
    # 30 ms per chunk against 12 ms per token keeps 0.012 s
    t = targets({"tpot_ms": {"mean": 12.0}, "itl_ms": {"mean": 30.0}}, 1)
    assert t["tpot"] == pytest.approx(0.012)
    # a median alone (the SGLang cookbook's P50 tables) is what is compared, as before: 146.95 ms
    assert targets({"tpot_ms": {"median": 146.95}}, 4)["tpot"] == pytest.approx(0.14695)


def _point(**kw):
    p = {"engine": "sglang", "version": "0.5.15.post1", "gpu": "h200-sxm", "kvplan_model": "deepseek-v4-flash",
         "weight_dtype": "fp8", "kv_dtype": "fp8", "isl": 8192, "osl": 1024, "concurrency": 1024,
         "gpus": 4, "tp": 4, "dp": 4, "ep": 4,
         "metrics": {"ttft_ms": {"median": 217694}, "tpot_ms": {"median": 146.95}},
         "flags": {"tp": 4, "dp": 4, "enable_dp_attention": True, "max-running-requests": 256}}
    p.update(kw)
    return p


def test_sglang_dp_attention_tp_counts_every_rank():
    # sglang-pr-31363 / the DeepSeek-V4 cookbook's H200 FP8 high-throughput cell: --tp 4 --dp 4 --enable-dp-attention
    # --moe-a2a-backend deepep --max-running-requests 256 on 4 H200s. SGLang's --tp-size counts every rank, so each
    # of the 4 attention replicas has 4 / 4 = 1 GPU, the experts are spread over all 4, and the running limit is the
    # deployment's: 256 // 4 = 64 a replica. Read before as tp 4 x dp 4 (16 GPUs' worth) at 256 a replica.
    c, why = case_of(_point(), "test", "")
    assert c is not None, why
    assert (c.tp, c.dp, c.ep, c.gpus, c.max_seqs) == (1, 4, 4, 4, 64)
    # GPUStack's DeepSeek-V3.2 on 8 H200s, --tp 8 --dp 8 --enable-dp-attention, no EP: tp 8 / 8 = 1, the MoE
    # (tensor parallel over all 8 ranks) spread over 8
    c, _ = case_of(_point(gpus=8, tp=8, dp=8, ep=1, kvplan_model="deepseek-v3.2",
                          flags={"tp": 8, "dp": 8, "enable_dp_attention": True}), "test", "")
    assert (c.tp, c.dp, c.ep, c.max_seqs) == (1, 8, 8, None)


def test_dp_without_dp_attention_is_read_as_stated():
    # vLLM's --tensor-parallel-size and max_num_seqs are one data-parallel rank's: tp 2 x dp 2 on 4 GPUs, 256 each
    c, _ = case_of(_point(engine="vllm", version="0.11.0", tp=2, dp=2, ep=1,
                          flags={"max_num_seqs": 256}), "test", "")
    assert (c.tp, c.dp, c.ep, c.max_seqs) == (2, 2, 1, 256)
    # SGLang with --dp but DP attention off: as stated
    c, _ = case_of(_point(tp=2, dp=2, ep=1, flags={"max-running-requests": 256}), "test", "")
    assert (c.tp, c.dp, c.ep, c.max_seqs) == (2, 2, 1, 256)


def test_dp_attention_replica_holds_its_attention_whole_and_runs_the_replica_limit():
    c, _ = case_of(_point(), "test", "")
    b = Built(c)
    assert b.shape is not None, b.why
    # one replica's attention on one GPU (tp 1) reads all of the dense weights a tp-4 rank read a quarter of
    c4, _ = case_of(_point(flags={"tp": 4, "dp": 4}), "test", "")  # DP attention off: read as tp 4
    b4 = Built(c4)
    assert b.shape.tp == 1 and b4.shape.tp == 4
    wb = weight_bytes(find_in_catalog("deepseek-v4-flash"), "fp8")
    split = wb.sharded + wb.lm_head  # attention, shared experts and LM head: whole at tp 1, a quarter at tp 4
    assert b.shape.dense_bytes == int(split + wb.replicated)
    assert b4.shape.dense_bytes == int(split // 4 + wb.replicated)
    assert b.shape.expert_bytes == b4.shape.expert_bytes  # 256 experts / 4 ranks either way
    assert b.shape.ep_replicas == 4  # a rank's experts serve the 4 replicas' tokens
    assert b.load.cap == 64  # the stated limit binds before the KV room: 256 // 4


def test_every_sglang_dp_attention_point_fits_its_gpus():
    # after reading, tp x dp is the GPU count the source states, as TensorRT-LLM's attention-DP points already were
    cases, _ = speed_cases()
    dpa = [c for c in cases if c.engine == "sglang" and c.dp > 1 and c.flags.get("enable_dp_attention")]
    assert dpa
    assert all(c.tp * c.dp * c.pp == c.gpus and c.ep >= c.dp for c in dpa), \
        [(c.source, c.id, c.tp, c.dp, c.gpus) for c in dpa if c.tp * c.dp * c.pp != c.gpus]


def test_an_unstated_layout_is_skipped_with_its_reason():
    # MLPerf v5.1, Cisco's HGX H100 x 16 over 2 nodes: no tp in the results and no config for the system among
    # the submitter's files; one tp-16 deployment is not what NVIDIA's harness runs, so the point is not priced.
    p = _point(engine="trtllm", version=None, gpus=16, tp=None, dp=None, ep=None, flags={}, layout="unstated")
    assert case_of(p, "t", "") == (None, "layout not stated")


def test_a_disaggregated_side_without_its_layout_is_skipped():
    # lm-sys/lm-sys.github.io@09af7eee:blog/2025-07-20-k2-large-scale-ep.md: "128 H200 GPUs with 1P1D (4 nodes/P and
    # 12 nodes/D)", "Decode Throughput | 288k tokens/sec (12 D Nodes)", and no tp, dp-attention or EP size for either
    # side. Read as one tp-96 replica the decode point was priced 152 tok/s against 288,000 (round 47); both sides are
    # kept and skipped for their unstated layout, and the source prices nothing.
    import yaml

    doc = yaml.safe_load((CORPUS / "lmsys-blog-2025-07-20-k2-large-scale-ep.yaml").read_text())
    whys = [case_of({**doc["defaults"], **p}, doc["source"]["id"], doc["source"]["date"]) for p in doc["points"]]
    assert [p["id"] for p in doc["points"]] == ["prefill-4nodes", "decode-12nodes-bs480"]
    assert whys == [(None, "layout not stated")] * 2


def test_attention_dp_batch_size_is_each_ranks():
    # MLPerf v5.1, NVIDIA B200 x 8, DeepSeek-R1 Server (closed/NVIDIA/configs/B200-SXM-180GBx8/Server/deepseek-r1.py):
    # tensor_parallelism 8, moe_expert_parallelism 8, enable_attention_dp True, gpu_batch_size 512 per attention rank
    # (llmlib/config.py: "max-bs applies per attention-rank"). Under attention DP TensorRT-LLM's tensor_parallel_size
    # counts the attention ranks (Mapping.dp_size = tp_size: kvplan/engines/trtllm/layout.py), so the point is 8 ranks
    # of tp 1, each running 512 (the deployment 8 x 512 = 4,096), its load 8 replicas.
    p = _point(engine="trtllm", version=None, kvplan_model="deepseek-r1", gpus=8, tp=8, dp=None, ep=8,
               flags={"gpu_batch_size": "512", "enable_attention_dp": "True"})
    c, why = case_of(p, "t", "")
    assert c is not None, why
    assert (c.tp, c.dp, c.ep, c.max_seqs, c.load.dp) == (1, 8, 8, 512, 8)
    plain = _point(engine="trtllm", version=None, kvplan_model="deepseek-r1", gpus=8, tp=8, dp=None, ep=8,
                   flags={"gpu_batch_size": "512"})
    assert case_of(plain, "t", "")[0].max_seqs == 512  # no attention DP: one engine's limit


def test_mlperf_v40_candidate_reads_as_the_config_built_it():
    # MLPerf Inference v4.0, NVIDIA DGX H100 (8 x H100-SXM-80GB, status available), llama2-70b-99.9, transcribed as a
    # candidate training source (tests/fixtures/speed/candidates/: not read by the fit; it failed the adoption rule,
    # docs/speed-history.md). Config classes H100_SXM_80GB_TP2x4(_HighAccuracy) (mlcommons/inference_results_v4.0
    # @8121a811:closed/NVIDIA/configs/llama2-70b/{Server,Offline}/__init__.py): tensor_parallelism 2, use_fp8,
    # gpu_batch_size 1024 (Server) and 896 (Offline), so 8 GPUs run 8 / 2 = 4 engine groups
    # (closed/NVIDIA/code/harness/harness_llm/main_llm.cc at @e81135a6: one receiver per tp x pp ranks). LoadGen's
    # Server summary (@3c4a1cf1:closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Server/performance/
    # run_1/mlperf_log_summary.txt): target_qps 71.2 (= 17.8 x 4), 20556.40 completed tokens/s over 70.42 samples/s =
    # 291.91 tokens a sample, mean TPOT 136836695 ns. The builder passes no use_fp8_context_fmha
    # (@920148447:closed/NVIDIA/code/llama2-70b/tensorrt/builder.py). sha256("mlperf-inference-v4.0")[:2] = 0x922c =
    # 37420, mod 100 = 20 < 70: a training source if it were in the corpus.
    cases, _ = read_corpus(CORPUS / "candidates")
    got = {c.id.rsplit("-", 1)[1]: c for c in cases if c.source == "mlperf-inference-v4.0"}
    assert set(got) == {"server", "offline"} and in_training("mlperf-inference-v4.0")
    for c in got.values():
        assert (c.engine, c.era, c.gpu, c.model) == ("trtllm", "trtllm-engine", "h100-sxm", "llama-2-70b-hf")
        assert (c.gpus, c.tp, c.dp, c.weight_dtype, c.kv_dtype) == (8, 2, 4, "fp8", "fp8")
        assert not fp8_context_fmha(c)
    s, o = got["server"], got["offline"]
    assert (s.max_seqs, o.max_seqs) == (1024, 896)
    assert s.load.rate == pytest.approx(71.2) and o.load.rate == float("inf")
    assert s.load.osl == pytest.approx(291.91) and s.targets["tpot"] == pytest.approx(0.136836695)
    assert not any(c.source == "mlperf-inference-v4.0" for c in speed_cases()[0])


def test_token_position_candidate_reads_as_its_scripts_ran_it():
    # InferenceX's experimental MiniMax-M2.5 sweep, a candidate (tests/fixtures/speed/candidates/, not read by the fit:
    # docs/speed-history.md, Tried and not adopted). SemiAnalysisAI/InferenceX@843c6254:experimental/
    # token_position_decode_slo/minimax-m2.5: serve_minimax_tep8_sbatch.sh runs --tensor-parallel-size 8
    # --enable-expert-parallel on --gres=gpu:8; bmk_minimax_sbatch.sh sends 10 x C prompts at --max-concurrency C,
    # 128 tokens out; results/minimax_m25_vllm_tep8_isl1024_osl128_conc4.json: num_prompts 40, total_input_tokens
    # 40960 (= 1,024 x 40), median_ttft 0.47718007676303387 s, median_tpot 0.013622666738458036 s, median_e2el
    # 2.4119777074083686 s, output_throughput 211.68749692451834 (no means saved: TTFT and E2E read as medians).
    cases, _ = read_corpus(CORPUS / "candidates")
    got = {c.id: c for c in cases if c.source == "inferencex-token-position-minimax-m2.5-h200"}
    assert len(got) == 65 and in_training("inferencex-token-position-minimax-m2.5-h200")
    c = got["tep8-isl1024-c4"]
    assert (c.engine, c.gpu, c.model, c.gpus, c.tp, c.ep, c.dp) == ("vllm", "h200-sxm", "minimax-m2.5", 8, 8, 8, 1)
    assert (c.load.isl, c.load.osl, c.load.concurrency, c.load.num_prompts) == (1024, 128, 4, 40)
    assert c.load.fixed and c.load.medians == {"ttft", "e2el"} and c.load.endpoint == "completions"
    assert c.targets["ttft"] == pytest.approx(0.47718, abs=1e-6)
    assert c.targets["tpot"] == pytest.approx(0.013623, abs=1e-6)
    assert c.targets["output_throughput"] == pytest.approx(211.687, abs=1e-3)


def test_gpustack_sglang_gpt_oss_a100_reads_as_the_page_printed_it():
    # GPUStack Performance Lab, gpt-oss-20b on one A100 SXM 80GB, SGLang 0.5.4.post2 at its defaults, vllm bench serve,
    # ShareGPT, 1,000 prompts at once (gpustack/gpustack@7ae332aaf05783e657560ef927c527b156e2536d:
    # docs/performance-lab/gpt-oss-20b/a100.md, "SGLang" block): "Benchmark duration (s): 735.43", "Total input
    # tokens: 215312", "Total generated tokens: 195617", "Request throughput (req/s): 1.36", "Output token throughput
    # (tok/s): 265.99", "Total Token throughput (tok/s): 558.76", "Mean TTFT (ms): 140888.75", "Mean ITL (ms):
    # 1889.78". By hand: 195,617 / 735.43 = 265.99 and (215,312 + 195,617) / 735.43 = 558.76, so the figures are the
    # run's own (issue 21 checked the +1,018% output tok/s there against the page). The reader's lengths from the
    # rates: (558.76 - 265.99) / 1.36 = 215.27 in (the page: 215,312 / 1,000 = 215.3) and 265.99 / 1.36 = 195.58 out
    # (195,617 / 1,000 = 195.6), drawn (ShareGPT); TPOT is the mean ITL, 1.88978 s.
    cases, _ = speed_cases()
    c = next(c for c in cases if (c.source, c.id) == ("gpustack-perflab-gpt-oss-20b-a100", "L123-sglang"))
    assert (c.engine, c.era, c.gpu, c.model, c.tp, c.weight_dtype) == (
        "sglang", "sglang<0.5.14", "a100-sxm-80", "gpt-oss-20b", 1, "mxfp4")
    assert c.load.isl == pytest.approx(215.3, abs=0.05) and c.load.osl == pytest.approx(195.6, abs=0.05)
    assert c.load.drawn and c.load.num_prompts == 1000 and c.load.rate == float("inf")
    assert c.targets["output_throughput"] == pytest.approx(195617 / 735.43, abs=0.005)
    assert c.targets["ttft"] == pytest.approx(140.88875) and c.targets["tpot"] == pytest.approx(1.88978)


def test_a_vllm_run_under_enforce_eager_is_skipped_not_priced_as_a_graph_run():
    # vllm-issue-20469 (vllm-project/vllm#20469): "vllm serve Qwen/Qwen3-14B-AWQ ... --enforce-eager" on one A100 80GB
    # PCIe under vLLM 0.9.1. Eager PyTorch launches every layer's kernels each step, which vLLM's set (fitted on
    # CUDA-graph runs) has no term for: priced, the one point moved vLLM's `layer` cost 3.2e-5 -> 5.5e-5 s and the
    # training CV's vLLM figures 24.6 -> 26.8% (vLLM in-process 14.2 -> 19.3%). The same point without the flag reads.
    import yaml

    doc = yaml.safe_load((CORPUS / "vllm-issue-20469.yaml").read_text())
    p = {**doc["defaults"], **doc["points"][0]}
    assert p["flags"]["enforce_eager"] is True
    case, why = case_of(p, "vllm-issue-20469", "")
    assert case is None and "eager" in why
    flags = {k: v for k, v in p["flags"].items() if k != "enforce_eager"}
    case, why = case_of({**p, "flags": flags}, "vllm-issue-20469", "")
    assert case is not None, why
    # another engine's flag of that name is not read (only vLLM's --enforce-eager is known)
    case, why = case_of({**p, "engine": "sglang", "version": "0.5.9"}, "test", "")
    assert case is not None, why


def test_a_boolean_flag_kvplan_reads_is_true_or_false_else_refused(tmp_path):
    # `enforce-eager: 1` once read as off (`_on` takes only "true"): the eager run was priced as a CUDA-graph run.
    # The corpus file is refused, naming the point and the flag; a flag kvplan does not read keeps any value.
    import yaml

    from kvplan.speed.corpus import read_corpus

    doc = yaml.safe_load((CORPUS / "vllm-issue-20469.yaml").read_text())
    doc["points"] = doc["points"][:1]
    doc["points"][0]["flags"] = {**(doc["points"][0].get("flags") or {}), "enforce-eager": 1}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError, match="point .*flag enforce-eager 1 is not true or false"):
        read_corpus(tmp_path)
    doc["points"][0]["flags"] = {"enforce_eager": False, "some_other_flag": 1}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(doc))
    cases, _ = read_corpus(tmp_path)
    assert len(cases) == 1


def test_sglang_and_trtllm_runs_stating_cuda_graphs_off_are_skipped_as_eager():
    # SGLang's --disable-cuda-graph (store_true, 'Disable cuda graph.': sgl-project/sglang@469c63e5
    # python/sglang/srt/server_args.py); TensorRT-LLM's LLM API use_cuda_graph false (TorchLlmArgs, default False
    # before 1.0: NVIDIA/TensorRT-LLM@fcd3f316 tensorrt_llm/llmapi/llm_args.py) and cuda_graph_config null (its
    # successor, graphs on by default_factory unless None). No corpus point states one (grep of tests/fixtures/speed).
    import yaml

    doc = yaml.safe_load((CORPUS / "vllm-issue-20469.yaml").read_text())
    base = {**doc["defaults"], **doc["points"][0]}
    base = {**base, "flags": {k: v for k, v in base["flags"].items() if k != "enforce_eager"}}
    sglang = {**base, "engine": "sglang", "version": "0.5.9"}
    assert case_of(sglang, "t", "")[0] is not None
    for flags, engine in (({"disable_cuda_graph": True}, sglang), ({"disable-cuda-graph": "true"}, sglang)):
        case, why = case_of({**engine, "flags": flags}, "t", "")
        assert case is None and "disable_cuda_graph: true" in why
    trt = {**base, "engine": "trtllm", "version": "1.0.0"}
    assert case_of({**trt, "flags": {"cuda_graph_config": {"enable_padding": True}}}, "t", "")[0] is not None
    assert case_of({**trt, "flags": {"use_cuda_graph": True}}, "t", "")[0] is not None
    case, why = case_of({**trt, "flags": {"cuda_graph_config": None}}, "t", "")
    assert case is None and "cuda_graph_config: null" in why
    case, why = case_of({**trt, "flags": {"use_cuda_graph": False}}, "t", "")
    assert case is None and "use_cuda_graph: false" in why
    # vLLM reads none of these (its flag is enforce_eager)
    assert case_of({**base, "flags": {"disable_cuda_graph": True, "use_cuda_graph": False}}, "t", "")[0] is not None
