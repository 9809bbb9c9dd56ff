"""vLLM's CUDA-graph estimate by release and model runner: what kvplan.engines.vllm.runner reads from the wheels."""

from __future__ import annotations

from kvplan.engines.vllm import runner
from kvplan.engines.vllm.defaults import settings as vllm_settings
from kvplan.hardware.gpus import find_gpu
from kvplan.planning.deploy import Deployment
from kvplan.planning.plan import Request
from kvplan.sources.catalog import find_in_catalog


def _subtracted(name: str, version: str, gpu: str = "h100", weight_dtype: str | None = None) -> bool:
    model = find_in_catalog(name)
    req = Request(context=8192, weight_dtype=weight_dtype)
    return vllm_settings(model, find_gpu(gpu), Deployment(), req, version).cudagraphs


def test_v2_runner_of_0_22_to_0_28_subtracts_nothing():
    # The V2 runner's profile_cudagraph_memory returns 0 (gpu/model_runner.py 0.22.0 L620-622 ... 0.28.0 L843-845);
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES and _is_default_v2_model_runner_model, config/vllm.py by release:
    # 0.22.0 {Qwen3ForCausalLM}, dense and unquantized only
    assert not _subtracted("qwen3-8b", "0.22.0") and _subtracted("llama-3.1-8b", "0.22.0")
    assert _subtracted("qwen3-30b-a3b", "0.22.0")  # MoE: V1
    # 0.23.0 adds Llama and Mistral, still dense and unquantized
    assert not _subtracted("llama-3.1-8b", "0.23.0") and _subtracted("llama-3.1-8b", "0.23.0", weight_dtype="fp8")
    assert _subtracted("qwen2.5-7b-instruct", "0.23.0")  # Qwen2ForCausalLM is not listed
    # 0.24.0: the list (Qwen3, DeepseekV2, Qwen2Moe, GraniteMoe, Llama, Mistral), quantized or MoE alike
    assert not _subtracted("llama-3.1-8b", "0.24.0", weight_dtype="fp8")
    assert not _subtracted("deepseek-v2-lite", "0.24.0")
    assert _subtracted("qwen2.5-7b-instruct", "0.24.0") and _subtracted("qwen3-30b-a3b", "0.24.0")
    # 0.25.0-0.28.x: every dense model, the listed MoE ones; not hybrids (unless listed, 0.27+) nor attention-free
    assert not _subtracted("qwen2.5-7b-instruct", "0.25.0") and not _subtracted("gemma-2-9b", "0.28.0")
    assert _subtracted("qwen3-30b-a3b", "0.26.0") and not _subtracted("deepseek-v2-lite", "0.26.0")
    assert _subtracted("qwen3.5-27b", "0.25.0") and _subtracted("falcon-mamba-7b", "0.26.0")
    # 0.29.0: V2 measures its graphs (gpu/cudagraph_utils.py profile_cudagraph_memory): subtracted again
    assert _subtracted("qwen2.5-7b-instruct", "0.29.0") and _subtracted("llama-3.1-8b", "0.29.0")


def test_no_estimate_on_amd():
    # gpu_worker.py 0.20.0 L379-385 profiles graphs only `not current_platform.is_rocm()`; 0.24.0 L444-453 only
    # `current_platform.is_cuda()`: an AMD GPU's budget keeps the graphs' memory
    assert _subtracted("qwen2.5-7b-instruct", "0.20.0") and not _subtracted("qwen2.5-7b-instruct", "0.20.0", "mi300x")


def test_the_plan_says_which_and_why():
    model, gpu = find_in_catalog("llama-3.1-8b"), find_gpu("h100")
    note = runner.graph_note(model, (0, 23, 0), gpu, eager=False)
    assert note and "V2 model runner" in note and "estimate is 0" in note
    assert runner.graph_note(model, (0, 20, 0), gpu, eager=False) is None
    assert runner.graph_note(model, (0, 23, 0), gpu, eager=True) is None
    from kvplan.engines.vllm.cudagraphs import graph_notes

    # Llama 3.1 8B: 32 layers x 0.126 MiB -> a 6 MiB graph, the figure the note names
    st = vllm_settings(model, gpu, Deployment(), Request(context=8192), "0.20.0")
    (fitted,) = graph_notes(model, Deployment(), st)
    assert "6 MiB a further graph" in fitted and "fitted" in fitted
    st = vllm_settings(model, gpu, Deployment(), Request(context=8192), "0.19.0")
    assert graph_notes(model, Deployment(), st) == ()  # not subtracted: nothing to say


def test_a_hybrids_graph_estimate_says_it_is_an_extrapolation():
    # Qwen3.5-27B: 64 layers (16 full attention, 48 GDN) on each rank at tp 4; 64 x 0.126 MiB = 8.06 MiB, up to
    # the 2 MiB page: 10 MiB a further graph. The fit saw attention layers only (benchmarks/budget_calibrate.py keeps
    # hybrids out), so the plan adds a caveat with the one hybrid log in the corpus: vllm-foam-qwen35-27b-tp4-v019
    # printed "Estimated CUDA graph memory: 1.59 GiB total" where kvplan gives 209 + 100 x 10 MiB = 1.18 GiB.
    from kvplan.engines.vllm.cudagraphs import cudagraph_estimate, graph_notes, has_recurrent_layers

    gpu, dep = find_gpu("h100"), Deployment(4)
    hybrid, dense = find_in_catalog("qwen3.5-27b"), find_in_catalog("qwen3-32b")
    assert has_recurrent_layers(hybrid) and not has_recurrent_layers(dense)
    # Falcon-H1 runs a Mamba-2 mixer beside the attention in every layer (its config's mamba_* fields; a ParallelHybrid
    # layer whose kind is its attention's): a hybrid too
    assert has_recurrent_layers(find_in_catalog("falcon-h1-0.5b-instruct"))
    fitted, caveat = graph_notes(hybrid, dep, vllm_settings(hybrid, gpu, dep, Request(context=8192), "0.20.0"))
    assert "10 MiB a further graph" in fitted
    assert "hybrid" in caveat and "1.59 GiB" in caveat and "1.18" in caveat
    # the caveat quotes kvplan's own figure as a constant: tie it to the estimate (64 layers a rank at tp 4, 1,024
    # sequences), so a refit of the per-layer cost that moves it fails here rather than leaving the note stale
    st = vllm_settings(hybrid, gpu, dep, Request(context=8192), "0.19.0")
    assert cudagraph_estimate(64, hybrid, 4, st.max_num_seqs, gpu, st.weight_dtype) == (209 + 100 * 10) * 2**20
    (only,) = graph_notes(dense, dep, vllm_settings(dense, gpu, dep, Request(context=8192), "0.20.0"))
    assert "hybrid" not in only
