"""`kvplan disagg`: the KV a request moves (hand arithmetic from the models' config.json), the pools and
the refusal of one that would not start, the end-to-end simulation, the ratio, the CLI and the API."""

from __future__ import annotations

import json
import math
import shlex

import pytest
from typer.testing import CliRunner

import kvplan
from conftest import load_script
from kvplan.cli import app
from kvplan.core.dtypes import BF16, FP8
from kvplan.core.errors import EXIT_DOES_NOT_FIT, KvplanError
from kvplan.hardware.links import bundled_links, find_link, load_link_file
from kvplan.planning.deploy import Deployment
from kvplan.planning.transfer import kv_moved, transfer_seconds
from kvplan.report.disagg import manifest, text_lines
from kvplan.simulator.disagg import balance
from kvplan.simulator.pd import prefill_done, simulate_pd
from kvplan.simulator.workload import SimRequest
from kvplan.sources.resolve import resolve_model

runner = CliRunner()


def _spec(name):
    return resolve_model(name).spec


# --- KV moved per request -------------------------------------------------------------------------

def test_llama_70b_gqa_moves_its_heads_and_each_decode_rank_gets_its_share():
    # Llama-3.1-70B config.json: 80 layers, 8 KV heads, head_dim 8192 / 64 = 128, bf16.
    # K and V: 80 x 2 x 8 x 128 x 2 B x 8,192 tokens = 2,684,354,560 B; decode tp 8: 1 head per rank,
    # 2,684,354,560 / 8 = 335,544,320 B; prefill tp 4: 2 heads per rank, 671,088,640 B, each sent once.
    m = kv_moved(_spec("llama-3.1-70b"), 8192, BF16, BF16, Deployment(4, 1), Deployment(8, 1))
    assert m.kv_bytes == 2_684_354_560
    assert m.per_decode_rank == 335_544_320
    assert m.per_prefill_rank == 671_088_640
    assert m.received_bytes == 2_684_354_560  # no head replicated on the decode side
    assert m.sent_per_prefill_rank == 671_088_640


def test_deepseek_v3_mla_latent_is_whole_on_every_decode_rank():
    # DeepSeek-V3 config.json: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values, bf16:
    # 61 x 576 x 2 B x 8,192 = 575,668,224 B, and every decode rank holds all of it (replicated):
    # 8 ranks receive 8 x 575,668,224 = 4,605,345,792 B; 4 prefill ranks send 1,151,336,448 B each.
    m = kv_moved(_spec("deepseek-v3"), 8192, BF16, BF16, Deployment(4, 1), Deployment(8, 1))
    assert m.kv_bytes == 575_668_224
    assert m.per_decode_rank == 575_668_224
    assert m.received_bytes == 8 * 575_668_224
    assert m.sent_per_prefill_rank == 2 * 575_668_224


def test_an_fp8_cache_moves_half_the_bytes():
    # 80 x 2 x 8 x 128 x 1 B x 8,192 = 1,342,177,280 B
    m = kv_moved(_spec("llama-3.1-70b"), 8192, FP8, BF16, Deployment(8, 1), Deployment(8, 1))
    assert m.kv_bytes == 1_342_177_280
    assert m.per_decode_rank == 167_772_160


def test_sliding_window_layers_move_only_their_window():
    # gemma-2-9b config.json: 42 layers alternating sliding (window 4,096) and global, 8 KV heads x 256,
    # bf16: a token costs 8 x 256 x 2 x 2 B = 8,192 B per layer. 8,192-token prompt: 21 global layers
    # x 8,192 tokens + 21 sliding layers x 4,096 tokens = 258,048 token-layers x 8,192 B = 2,113,929,216 B.
    m = kv_moved(_spec("gemma-2-9b"), 8192, BF16, BF16, Deployment(1, 1), Deployment(2, 1))
    assert m.kv_bytes == 2_113_929_216
    assert m.per_decode_rank == 2_113_929_216 // 2  # 4 of the 8 heads per rank at tp 2


def test_a_hybrid_moves_a_fixed_state_beside_its_attention_tokens():
    # Qwen3-Next: linear-attention layers keep one state per sequence whatever the prompt, so doubling the
    # prompt adds only the attention layers' tokens: moved(2P) - moved(P) = moved(3P) - moved(2P).
    spec = _spec("qwen3-next-80b-a3b-thinking")
    a, b, c = (kv_moved(spec, n, BF16, BF16, Deployment(1, 1), Deployment(1, 1)).kv_bytes for n in (4096, 8192, 12288))
    assert b - a == c - b > 0
    assert a - (b - a) > 0  # the state: bytes the first 4,096 tokens cost beyond their token share


def test_decode_tp_beyond_the_kv_heads_receives_a_copy_per_rank_and_counts_the_model_once():
    # Llama-3.1-70B at decode tp 16: 8 KV heads, each held by 2 ranks (max(1, 8 // 16) = 1 head per rank).
    m = kv_moved(_spec("llama-3.1-70b"), 8192, BF16, BF16, Deployment(8, 1), Deployment(16, 1))
    assert m.kv_bytes == 2_684_354_560  # counted once
    assert m.per_decode_rank == 335_544_320
    assert m.received_bytes == 16 * 335_544_320  # every rank pulls its copy
    # pipeline stages: each rank of a stage holds that stage's layers only (40 of 80)
    pp = kv_moved(_spec("llama-3.1-70b"), 8192, BF16, BF16, Deployment(8, 1), Deployment(8, 2))
    assert pp.per_decode_rank == 335_544_320 // 2


def test_transfer_time_is_latency_plus_the_busiest_ranks_bytes_over_one_gpus_link():
    # ib-400g: 50e9 B/s per GPU, 10 us (aiconfigurator's h800_sxm.yaml node block). Prefill tp 4 sends
    # 671,088,640 B per rank (> 335,544,320 received per decode rank): 1e-5 + 671,088,640 / 5e10 s.
    m = kv_moved(_spec("llama-3.1-70b"), 8192, BF16, BF16, Deployment(4, 1), Deployment(8, 1))
    assert transfer_seconds(m, find_link("ib-400g")) == pytest.approx(1e-5 + 671_088_640 / 50e9)
    assert transfer_seconds(m, find_link("nvlink")) < transfer_seconds(m, find_link("ib-200g"))


# --- link profiles --------------------------------------------------------------------------------

def test_every_bundled_link_is_sourced_and_found_by_alias():
    links = bundled_links()
    assert {"nvlink4", "ib-400g", "ib-200g", "roce-400g", "pcie-gen5", "pcie-gen4"} <= set(links)
    for link in links.values():
        assert link.source and link.per_gpu_bytes_per_s > 0 and 0 <= link.latency_s < 1
    assert find_link("NDR").key == "ib-400g"
    with pytest.raises(KvplanError, match="unknown link"):
        find_link("carrier-pigeon")


def test_a_malformed_link_file_is_one_line_error(tmp_path):
    bad = tmp_path / "l.yaml"
    bad.write_text("key: x\nname: y\nper_gpu_bytes_per_s: -1\nlatency_s: 0\nsource: s\nconfidence: high\n")
    with pytest.raises(KvplanError, match="per_gpu_bytes_per_s"):
        load_link_file(bad)


# --- pools and the refusal ------------------------------------------------------------------------

def test_the_crash_looping_recipe_is_refused():
    # ai-dynamo/dynamo#10104: an AIC-generated vLLM disaggregated deployment of Llama-3.1-70B-Instruct-FP8 on
    # 8 GPUs gave its four prefill workers (so one GPU each) max_model_len 131,072 without the KV memory for
    # it; they crash-looped. On an 80 GB H100 the FP8 weights leave about 1 GB: 131,072 tokens need
    # 80 x 2 x 8 x 128 x 2 B = 327,680 B per token x 131,072 = 42,949,672,960 B = 40 GiB (said in GiB, round 46:
    # "1 GPUs" and the bytes unlabelled in units were the new-user pass's finding).
    with pytest.raises(KvplanError, match="would not start") as info:
        kvplan.disagg("llama-3.1-70b-instruct", "h100", weight_dtype="fp8", isl=4096, osl=512, prefill_tp=1,
                      decode_tp=4, prefill_max_model_len=131072)
    assert info.value.param == "prefill_max_model_len"
    assert "(1 GPU, tp 1 pp 1)" in str(info.value) and "needs 40.00 GiB of KV per GPU" in str(info.value)
    r = runner.invoke(app, ["disagg", "llama-3.1-70b-instruct", "--gpu", "h100", "--weight-dtype", "fp8", "--isl", "4k",
                            "--osl", "512", "--prefill-tp", "1", "--decode-tp", "4", "--prefill-max-model-len", "128k"])
    assert r.exit_code == EXIT_DOES_NOT_FIT
    assert "--prefill-max-model-len" in r.output and "Traceback" not in r.output


def test_pools_say_what_they_hold_and_what_binds():
    r = kvplan.disagg("llama-3.1-70b", "h100", isl=8192, osl=1024, prefill_tp=4, decode_tp=8)
    assert r.prefill.plan.deployment.tp == 4 and r.decode.plan.deployment.tp == 8
    assert r.prefill.max_model_len == 8192 and r.decode.max_model_len == 9216
    assert r.prefill.needs >= 1 and r.prefill.holds >= r.prefill.needs
    assert r.decode_batch <= min(r.decode.holds, 256)
    assert r.decode_batch_binds in ("KV memory", "max_num_seqs", "TPOT SLO")
    # a decode replica's pool holds input + output per request: more decode tokens, fewer requests
    longer = kvplan.disagg("llama-3.1-70b", "h100", isl=8192, osl=8192, prefill_tp=4, decode_tp=8)
    assert longer.decode.holds < r.decode.holds


def test_the_ratio_favours_decode_at_short_prompts_and_prefill_at_long_ones():
    # Users report 1P:2D beating 1:1 at 1k-token prompts and not at 8k: a prefill replica serves 8x fewer
    # 8k prompts per second, so the balanced split moves toward prefill as prompts grow.
    short = kvplan.disagg("llama-3.1-70b", "h100", isl=1024, osl=1024, prefill_tp=8, decode_tp=8)
    long = kvplan.disagg("llama-3.1-70b", "h100", isl=8192, osl=1024, prefill_tp=8, decode_tp=8)
    assert short.ratio[1] / short.ratio[0] > long.ratio[1] / long.ratio[0]
    assert short.prefill_rps > long.prefill_rps


def test_balance_picks_the_fewest_replicas_within_ten_percent():
    assert balance(3.18, 6.86) == (2, 1)  # 6.36 vs 6.86: 7.6% apart
    assert balance(1.0, 1.0) == (1, 1)
    assert balance(1.0, 2.5) == (5, 2)  # 2:1 is 20% off, 3:1 17%, 5:2 exact


# --- the end-to-end simulation --------------------------------------------------------------------

def test_one_request_end_to_end_by_hand():
    # prefill 0.5 s, transfer 0.1 s, decode steps 0.01 s: TTFT = 0.6 s; 10 more tokens: done at 0.7 s.
    reqs = [SimRequest(0, 0.0, 100, 11)]
    run = simulate_pd(reqs, 1, 1, prefill_step_s=lambda p: 0.5, decode_step_s=lambda n, c: 0.01,
                      held_bytes=lambda t: t, kv_bytes=10_000, transfer_s=lambda p: 0.1, budget=8192,
                      max_num_seqs=8)
    assert run["ttft"] == [pytest.approx(0.6)]
    assert run["tpot"] == [pytest.approx(0.01)]
    assert run["finish"] == [pytest.approx(0.7)]


def test_prefill_batches_to_its_token_budget_and_decode_memory_stages_the_rest():
    # Two 100-token prompts at t=0 and a budget of 200: one prefill step computes both (done at 0.5 s).
    reqs = [SimRequest(0, 0.0, 100, 11), SimRequest(1, 0.0, 100, 11)]
    assert prefill_done(reqs, 1, lambda ps: 0.5, 200) == [0.5, 0.5]
    assert prefill_done(reqs, 1, lambda ps: 0.5, 150) == [0.5, 1.0]
    # A decode pool that holds one request (111 of 150 bytes): the second waits staged until the first
    # leaves at 0.7 s, then moves (0.1 s): TTFT 0.8 s.
    run = simulate_pd(reqs, 1, 1, prefill_step_s=lambda p: 0.5, decode_step_s=lambda n, c: 0.01,
                      held_bytes=lambda t: t, kv_bytes=150, transfer_s=lambda p: 0.1, budget=200, max_num_seqs=8)
    assert sorted(run["ttft"]) == [pytest.approx(0.6), pytest.approx(0.8)]
    assert run["staged_max"] == 1


def test_a_rate_searches_splits_and_runs_the_aggregated_deployment_beside():
    r = kvplan.disagg("llama-3.1-8b", "h100", isl=2048, osl=256, qps=20, duration=10, slo_ttft=0.5, slo_tpot=0.05,
                      max_gpus=8)
    s = r.search
    assert s["tried"] and s["tried"][0]["gpus"] == 2  # the fewest GPUs first: 1P1D of tp 1
    chosen = s["chosen"]  # 20 req/s of 2k/256 tokens is light for up to 8 H100s: a split meets the SLOs
    assert chosen is not None and chosen["pct_meeting_slo"] >= 90
    assert s["aggregated_same_gpus"]["gpus"] <= chosen["gpus"]
    fewest = s["aggregated_fewest"]
    assert fewest is not None and fewest["pct_meeting_slo"] >= 90


# --- output ---------------------------------------------------------------------------------------

def test_cli_text_fits_80_columns_and_json_has_every_figure():
    args = ["disagg", "deepseek-v3", "--gpu", "h200", "--isl", "8k", "--osl", "1k", "--prefill-tp", "8",
            "--decode-tp", "8", "--link", "ib-400g"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    table = [line for line in r.stdout.splitlines() if not line.startswith(("prefill command", "decode command"))]
    assert table and all(len(line) <= 80 for line in table), [line for line in table if len(line) > 80]
    assert "575,668,224 B once; 575,668,224 B per decode rank" in r.stdout
    j = runner.invoke(app, [*args, "--json", "--manifest"])
    data = json.loads(j.stdout)
    assert data["kv_moved"]["bytes"] == 575_668_224
    assert data["timing_s"]["transfer"] > 0 and 0 < data["timing_s"]["transfer_share_of_ttft"] < 1
    assert "NixlConnector" in data["prefill"]["command"] and "NixlConnector" in data["decode"]["command"]
    assert "kind: DynamoGraphDeployment" in data["manifest"]


def test_sglang_pools_get_their_disaggregation_mode():
    r = runner.invoke(app, ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512",
                            "--engine", "sglang", "--json"])
    data = json.loads(r.stdout)
    assert "--disaggregation-mode prefill" in data["prefill"]["command"]
    assert "--disaggregation-mode decode" in data["decode"]["command"]


def test_disagg_prints_the_compute_dtype_it_prices():
    # as fit and simulate do: Llama-3.1-8B's config says bf16, so the pools' 16-bit GEMMs are priced in bf16 on the
    # H100 SXM (datasheet 989 T, MAMF-measured 794.5 T, the profile's achieved_dense_flops)
    r = runner.invoke(app, ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512"])
    assert r.exit_code == 0
    assert "16-bit GEMMs and attention priced in bf16 (the model's dtype as served (bf16)) on h100-sxm" in r.stderr
    assert "run at its measured 794.5 TFLOP/s" in r.stderr


def test_manifest_names_each_pool_with_its_replicas_and_gpus():
    r = kvplan.disagg("llama-3.1-70b", "h100", isl=8192, osl=1024, prefill_tp=4, decode_tp=8, speed="roofline")
    text = manifest(r, {"prefill": "vllm serve m -tp 4", "decode": None}, "vllm")
    assert "VllmPrefillWorker:\n      replicas: 2" in text and 'gpu: "4"' in text
    assert "VllmDecodeWorker:\n      replicas: 1" in text and 'gpu: "8"' in text
    assert all(len(line) <= 80 for line in text_lines(r, {}))


def test_llmd_values_are_yaml_with_each_pools_replicas_gpus_and_args():
    # llm-d's modelservice values (llm-d/llm-d guides/pd-disaggregation/ms-pd/values.yaml) carry each
    # pool's replica count in prefill/decode.replicas, its tp in parallelism.tensor and nvidia.com/gpu
    # (tp 4: "4"; tp 8: "8"), and the vLLM args after `vllm serve MODEL`, tensor parallelism first.
    import yaml
    args = ["disagg", "llama-3.1-70b", "--gpu", "h100", "--isl", "8k", "--osl", "1k", "--prefill-tp", "4",
            "--decode-tp", "8", "--manifest-for", "llm-d", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    values = yaml.safe_load(data["manifest"])
    assert values["routing"]["proxy"]["connector"] == "nixlv2"
    assert values["modelArtifacts"]["uri"].startswith("hf://")
    for role, n, tp in (("prefill", data["rates"]["balanced_ratio"]["prefill"], 4),
                        ("decode", data["rates"]["balanced_ratio"]["decode"], 8)):
        pool = values[role]
        assert pool["replicas"] == n and pool["parallelism"]["tensor"] == tp, pool
        box = pool["containers"][0]
        assert box["modelCommand"] == "vllmServe"
        assert box["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
        assert box["args"][box["args"].index("--kv-transfer-config") + 1] == \
            '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
        assert box["args"][:2] == ["--tensor-parallel-size", str(tp)]
        assert sorted(box["args"][2:] + ["-tp", str(tp)]) == sorted(shlex.split(data[role]["command"])[3:])
    dynamo = runner.invoke(app, [*args[:-3], "--manifest"])  # --manifest alone: Dynamo's, as before
    assert dynamo.exit_code == 0 and "kind: DynamoGraphDeployment" in dynamo.stdout
    bad = runner.invoke(app, [*args[:-3], "--manifest-for", "helm"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output and "llm-d" in bad.output


def test_llmd_values_run_another_server_as_a_custom_command():
    import yaml
    r = kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512, speed="roofline")
    cmd = "python -m sglang.launch_server --model-path m --tp 1 --disaggregation-mode prefill"
    values = yaml.safe_load(manifest(r, {"prefill": cmd, "decode": None}, "sglang", "llm-d"))
    box = values["prefill"]["containers"][0]
    assert box["modelCommand"] == "custom" and box["command"] == ["python", "-m", "sglang.launch_server"]
    assert box["args"][:2] == ["--model-path", "m"] and "args" not in values["decode"]["containers"][0]


def test_a_serve_commands_environment_is_the_containers_env():
    # `--engine-opt use_v1=true` on vLLM 0.8-0.10 writes `VLLM_USE_V1=1 vllm serve ...` (a shell's form); a pod's
    # command or args cannot carry it: both manifests put it in the container's env (a Kubernetes EnvVar, its value
    # a string) and start the arguments at `vllm serve` / after it
    import yaml
    r = kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512, speed="roofline")
    cmd = "VLLM_USE_V1=1 vllm serve m -tp 1 --max-num-seqs 8"
    box = yaml.safe_load(manifest(r, {"prefill": cmd, "decode": None}, "vllm", "llm-d"))["prefill"]["containers"][0]
    assert box["env"] == [{"name": "VLLM_USE_V1", "value": "1"}] and box["modelCommand"] == "vllmServe"
    assert box["args"] == ["--tensor-parallel-size", "1", "--max-num-seqs", "8"]
    spec = yaml.safe_load(manifest(r, {"prefill": cmd, "decode": None}, "vllm"))["spec"]["services"]
    main = spec["VllmPrefillWorker"]["extraPodSpec"]["mainContainer"]
    assert main["env"] == [{"name": "VLLM_USE_V1", "value": "1"}] and main["args"][:3] == ["vllm", "serve", "m"]


def test_trtllm_pools_get_trtllm_serve_and_their_cache_transceiver_yaml():
    # TensorRT-LLM examples/disaggregated/README.md: each server `trtllm-serve MODEL ...
    # --extra_llm_api_options FILE`, FILE's cache_transceiver_config with max_tokens_in_buffer >= the
    # longest prompt (8,192 here), the context servers' with disable_overlap_scheduler; the router's
    # disagg_config.yaml counts context_servers / generation_servers, one url each.
    import yaml
    r = runner.invoke(app, ["disagg", "llama-3.1-70b", "--gpu", "h100", "--isl", "8k", "--osl", "1k",
                            "--prefill-tp", "4", "--decode-tp", "8", "--engine", "trtllm", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    files = {name: yaml.safe_load(text) for name, text in data["trtllm_files"].items()}
    ratio = data["rates"]["balanced_ratio"]
    for role, extra, key, tp in (("prefill", "ctx_extra-llm-api-config.yaml", "context_servers", 4),
                                 ("decode", "gen_extra-llm-api-config.yaml", "generation_servers", 8)):
        argv = shlex.split(data[role]["command"])
        flag = dict(zip(argv[2::2], argv[3::2]))
        assert argv[0] == "trtllm-serve" and flag["--tp_size"] == str(tp), argv
        assert flag["--extra_llm_api_options"] == extra
        assert flag["--max_seq_len"] == str(data[role]["max_model_len"])
        assert files[extra]["cache_transceiver_config"]["max_tokens_in_buffer"] == 8192
        router = files["disagg_config.yaml"][key]
        assert router["num_instances"] == ratio[role] == len(router["urls"])
    assert files["ctx_extra-llm-api-config.yaml"]["disable_overlap_scheduler"] is True
    assert "disable_overlap_scheduler" not in files["gen_extra-llm-api-config.yaml"]


def test_bad_inputs_are_one_line_errors():
    for args in (["--isl", "0", "--osl", "10"], ["--isl", "1k"], ["--isl", "1k", "--osl", "1k", "--link", "x"],
                 ["--isl", "1k", "--osl", "1k", "--prefill-tp", "3"], ["--qps", "2"],
                 ["--isl", "1k", "--osl", "1k", "--qps", "1e9", "--duration", "1e9"]):
        r = runner.invoke(app, ["disagg", "llama-3.1-8b", "--gpu", "h100", *args])
        assert r.exit_code != 0 and "Traceback" not in r.output and "internal error" not in r.output, (args, r.output)


def test_the_api_forwards_every_keyword_as_given(monkeypatch):
    # kvplan.disagg passes each of its inputs to disagg_run by name (once `disagg_run(**locals())`, which a new
    # local would have broken silently): the same names, and each value a distinct object seen arriving.
    import inspect

    import kvplan.api as api
    from kvplan.simulator.disagg_inputs import disagg_run

    names = list(inspect.signature(api.disagg).parameters)
    assert names == list(inspect.signature(disagg_run).parameters)
    seen = {}

    class Run:
        result = "the result"

    monkeypatch.setattr(api, "disagg_run", lambda *a, **kw: seen.update(zip(names, a), **kw) or Run())
    given = {name: object() for name in names}
    assert api.disagg(**given) == "the result" and seen == given


def test_pools_step_with_the_engines_coefficients():
    # The pools' step times take --engine's calibrated coefficients (kvplan.speed.model.coefficients), as
    # simulate's do; they once took vLLM's whatever the engine. SGLang has a fitted set of its own.
    from kvplan.simulator.adapter import sim_model
    from kvplan.simulator.model import StepTimer
    from kvplan.speed.model import covered

    assert covered("sglang")
    r = kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512, engine="sglang")
    spec, hw, n = resolve_model("llama-3.1-8b").spec, kvplan.gpu("h100"), r.decode_batch
    ctx = n * (4096 + 512 // 2)  # the decode batch at its mean context (kvplan.simulator.disagg.plan_disagg)

    def tpot(engine):
        return StepTimer(sim_model(r.decode.plan, spec, hw, engine=engine)).step(n, n, ctx, float(ctx + n))

    assert r.setup.speed_engine == "sglang" and r.tpot_s == pytest.approx(tpot("sglang"))
    assert tpot("sglang") != pytest.approx(tpot("vllm"), rel=1e-3)


def test_cli_is_the_apis_path_with_speed_and_says_whose_coefficients():
    base = ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "4k", "--osl", "512", "--json"]
    r = runner.invoke(app, [*base, "--engine", "sglang"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert ("sglang coefficients" in data["step_time_model"]
            and "step times: calibrated (sglang coefficients" in r.stderr)
    assert data["timing_s"]["tpot"] == pytest.approx(kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512,
                                                                   engine="sglang").tpot_s)
    r = runner.invoke(app, [*base, "--speed", "roofline"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["step_time_model"] == "roofline (a lower bound)" and "--speed roofline" in r.stderr
    roof = kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512, speed="roofline")
    assert data["timing_s"]["tpot"] == pytest.approx(roof.tpot_s)
    assert roof.tpot_s < kvplan.disagg("llama-3.1-8b", "h100", isl=4096, osl=512).tpot_s  # a lower bound
    assert runner.invoke(app, [*base, "--speed", "fast"]).exit_code == 2


def test_cli_and_api_bound_the_step_overhead_alike():
    # simulate's bounds (kvplan.simulator.bounds: 0 to 1,000 s) for both; the CLI once refused 10 s and more
    base = ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "1k", "--osl", "128", "--json"]
    assert runner.invoke(app, [*base, "--step-overhead", "20"]).exit_code == 0
    assert kvplan.disagg("llama-3.1-8b", "h100", isl=1024, osl=128, step_overhead=20).tpot_s >= 20
    r = runner.invoke(app, [*base, "--step-overhead", "2000"])
    assert r.exit_code == 2 and "--step-overhead must be between 0 and 1000" in r.stderr
    with pytest.raises(KvplanError) as exc:
        kvplan.disagg("llama-3.1-8b", "h100", isl=1024, osl=128, step_overhead=2000)
    assert exc.value.param == "step_overhead"
    with pytest.raises(KvplanError) as exc:  # an empty workload: the CLI's refusal, now the API's too
        kvplan.disagg("llama-3.1-8b", "h100", isl=1024, osl=128, qps=1e-3, duration=1)
    assert exc.value.param == "qps"


# --- published results side by side -------------------------------------------------------------

def test_published_pd_results_side_by_side_and_our_roofline_stays_below_them():
    mod = load_script("benchmarks/disagg_published.py", "disagg_published")
    rows = mod.compare()
    assert len(rows) == 4
    for row in rows:  # a roofline step time is a lower bound of a measured one
        assert 0 < row["our_ttft_ms"] <= row["their_ttft_ms"], row
        assert 0 < row["our_tpot_ms"] <= row["their_itl_ms"], row
        assert math.isfinite(row["our_ttft_ms"])


def test_a_max_model_len_beyond_the_models_context_is_refused_as_such():
    # gemma-2-9b config.json: max_position_embeddings 8,192; 8k in + 512 out needs a decode max_model_len of 8,704.
    with pytest.raises(KvplanError, match="beyond gemma-2-9b's context length 8,192") as info:
        kvplan.disagg("gemma-2-9b", "l40s", isl="8k", osl=512)
    assert info.value.param == "decode_max_model_len"


def test_a_pool_layout_refusal_names_the_pool():
    with pytest.raises(KvplanError, match="prefill pool") as info:
        kvplan.disagg("llama-3.1-8b", "h100", isl=1024, osl=128, prefill_tp=3)
    assert info.value.param == "prefill_tp"


def test_a_full_replica_does_not_block_one_with_free_slots():
    # Two decode replicas of two slots. r0 (111 B) -> replica 0; r1 (1,101 B) -> replica 1 (more free);
    # r2 (111 B) -> replica 0, now full by slots yet with the most free memory; r3 must go to replica 1
    # at once, not wait for replica 0 to drain (0.8 s). r0 and r1 arrive at 0.5 + 0.1 = 0.6 s and start a step;
    # r2 and r3 arrive at 0.6 s too, mid-step, and join at the next step, 0.61 s.
    reqs = [SimRequest(0, 0.0, 100, 11), SimRequest(1, 0.0, 100, 1001), SimRequest(2, 0.0, 100, 11),
            SimRequest(3, 0.0, 100, 11)]
    run = simulate_pd(reqs, 4, 2, prefill_step_s=lambda p: 0.5, decode_step_s=lambda n, c: 0.01,
                      held_bytes=lambda t: t, kv_bytes=10_000, transfer_s=lambda p: 0.1, budget=100, max_num_seqs=2)
    assert run["ttft"] == [pytest.approx(0.6), pytest.approx(0.6), pytest.approx(0.61), pytest.approx(0.61)]


def test_aiconfigurator_silicon_points_side_by_side_and_our_ttft_alone_stays_below_theirs():
    # aiconfigurator silicon_sample.csv, Qwen3-32B fp8 on H100, 4000/1000: five measured xPyD points.
    # One 4,000-token prompt's roofline prefill + transfer has no queue in it, so it is at most the
    # measured mean TTFT (367.7 ms the lowest); the decode batch is capped at theirs.
    mod = load_script("benchmarks/disagg_published.py", "disagg_published")
    rows = mod.compare_aiconfigurator()
    assert len(rows) == 5 and {r["engine"] for r in rows} == {"vllm", "sglang"}
    for row in rows:
        assert 0 < row["our_ttft_ms"] <= row["their_ttft_ms"], row
        assert 0 < row["our_batch"] <= row["their_batch"] and math.isfinite(row["our_tpot_ms"]), row


def test_the_api_takes_a_workload():
    # api.disagg once stored _requests' (requests, format) pair as the requests: every workload= call failed
    r = kvplan.disagg("llama-3.1-8b", "h100", workload="chat", qps=2, duration=5, max_gpus=4)
    assert r.search["tried"]


def test_a_pool_max_model_len_below_its_requests_is_refused(kvplan_home):
    # isl 1,024 + osl 128 = 1,152 tokens a decode request holds; a decode pool of max_model_len 1,024 would reject
    # it (vLLM refuses a prompt + max_tokens past max_model_len); 1,152 is enough; the prefill pool holds 1,024
    base = ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "1k", "--osl", "128"]
    r = CliRunner().invoke(app, [*base, "--decode-max-model-len", "1k"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    last = r.stderr.strip().splitlines()[-1]
    assert "--decode-max-model-len" in last and "1,152" in last
    r = CliRunner().invoke(app, [*base, "--prefill-max-model-len", "1023"])
    assert r.exit_code == 2 and "--prefill-max-model-len" in r.stderr.strip().splitlines()[-1]
    assert CliRunner().invoke(app, [*base, "--decode-max-model-len", "1152"]).exit_code == 0
    with pytest.raises(KvplanError) as e:
        kvplan.disagg("llama-3.1-8b", "h100", isl=1024, osl=128, decode_max_model_len=1024)
    assert e.value.param == "decode_max_model_len"


def test_trtllm_pools_max_seq_len_is_each_pools_max_model_len():
    # trtllm-serve's --max_seq_len is the server's length limit (tensorrt_llm/commands/serve.py): each pool's command
    # carries the max_model_len the pool was planned at, the one given past the requests' own (issue 22):
    # --prefill-max-model-len 16k = 16,384 and --decode-max-model-len 32k = 32,768 against --isl 8k + --osl 1k
    r = runner.invoke(app, ["disagg", "llama-3.1-8b", "--gpu", "h100", "--isl", "8k", "--osl", "1k", "--engine",
                            "trtllm", "--prefill-max-model-len", "16k", "--decode-max-model-len", "32k", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    for role, want in (("prefill", "16384"), ("decode", "32768")):
        argv = shlex.split(data[role]["command"])
        assert dict(zip(argv[2::2], argv[3::2]))["--max_seq_len"] == want, argv
