"""vLLM's all-reduce leaves its one-kernel paths for NCCL at the symmetric-memory limit from 0.11.0
(kvplan/speed/symm_allreduce.py)."""

from __future__ import annotations

from kvplan.hardware.gpus import find_gpu
from kvplan.speed.model import custom_allreduce_bytes

MIB = 2**20


def test_the_nccl_threshold_by_release_gpu_and_tp():
    # vLLM all_reduce_utils.py SYMM_MEM_ALL_REDUCE_MAX_SIZES (0.11.0 L45-58): "9.0" {2: 64, 4: 32, 6: 64, 8: 64} MB,
    # "10.0" {2: 8, 4: 32, 6: 128, 8: 128}; "10.3" from 0.19.0 {2: 4, 4: 32, 6: 32, 8: 64}; CustomAllreduce's own
    # max_size=8192 * 1024 before 0.11.0 (0.10.2: VLLM_ALLREDUCE_USE_SYMM_MEM defaults to "0")
    h100, b200, b300 = find_gpu("h100-sxm"), find_gpu("b200"), find_gpu("b300")
    assert custom_allreduce_bytes("vllm", 8, h100, "0.10.2") == 8 * MIB
    assert custom_allreduce_bytes("vllm", 8, h100, "0.11.0") == 64 * MIB
    assert custom_allreduce_bytes("vllm", 4, h100, "0.19.0") == 32 * MIB
    assert custom_allreduce_bytes("vllm", 8, b200, "0.17.0") == 128 * MIB
    assert custom_allreduce_bytes("vllm", 2, b200, "0.17.0") == 8 * MIB  # the table's 8 MB: no change at tp 2
    assert custom_allreduce_bytes("vllm", 8, b300, "0.18.0") == 8 * MIB  # "10.3" not in 0.18.0's table
    assert custom_allreduce_bytes("vllm", 8, b300, "0.19.0") == 64 * MIB
    # no multicast without NVSwitch (handle.multicast_ptr == 0: symm_mem.py L89-92); SM80 not in the table
    assert custom_allreduce_bytes("vllm", 8, find_gpu("h100-pcie"), "0.19.0") == 8 * MIB
    assert custom_allreduce_bytes("vllm", 8, find_gpu("a100-sxm-80"), "0.19.0") == 8 * MIB
    # tp 3: no custom kernel, no symmetric-memory entry; SGLang's rule is its own
    assert custom_allreduce_bytes("vllm", 3, h100, "0.19.0") == 0
    assert custom_allreduce_bytes("sglang", 8, h100, "0.5.3") == 8 * MIB


def test_a_run_without_the_custom_kernel_keeps_the_symmetric_memory_all_reduce():
    # vLLM builds its SymmMemCommunicator whether or not the custom kernel is on: CudaCommunicator.__init__ reads
    # use_torch_symm_mem = envs.VLLM_ALLREDUCE_USE_SYMM_MEM beside _ENABLE_CUSTOM_ALL_REDUCE and builds it under
    # `if use_torch_symm_mem and current_platform.is_cuda()` (0.11.0 wheel cuda_communicator.py L40, L67-71; 0.33.0
    # L68, L127-131), and `all_reduce` tries it after the custom kernel, before pynccl (0.11.0 L143-148; 0.33.0
    # L427-432): with --disable-custom-all-reduce (ca_comm None) a message below the table's size is still one kernel.
    # H100 (9.0) at tp 8: 64 MiB; B200 (10.0) at tp 2: 8 MiB; before 0.11.0 (the env var's default "0") NCCL: 0
    from dataclasses import replace

    import pytest

    from kvplan.bench.running import running
    from kvplan.speed.corpus import in_training
    from kvplan.speed.fit import Built
    from conftest import speed_cases
    h100, b200 = find_gpu("h100-sxm"), find_gpu("b200")
    assert custom_allreduce_bytes("vllm", 8, h100, "0.11.0", custom=False) == 64 * MIB
    assert custom_allreduce_bytes("vllm", 2, b200, "0.17.0", custom=False) == 8 * MIB
    assert custom_allreduce_bytes("vllm", 8, h100, "0.10.2", custom=False) == 0
    assert custom_allreduce_bytes("vllm", 8, find_gpu("h100-pcie"), "0.19.0", custom=False) == 0  # no multicast
    assert custom_allreduce_bytes("sglang", 8, h100, "0.5.3", custom=False) == 0  # no such communicator
    c = next(c for c in speed_cases()[0] if in_training(c.source) and c.engine == "vllm" and c.gpu == "h100-sxm"
             and c.tp == 8)
    off = {**c.flags, "disable_custom_all_reduce": "true"}
    new = Built(replace(c, flags=off, version="0.11.0"), running).shape
    old = Built(replace(c, flags=off, version="0.10.2"), running).shape
    # the one kernel's latency, 6.6 + 2 x 0.6 = 7.8 us (test_speed_custom_allreduce), below 64 MiB; the ring's before
    assert new.oneshot_latency_s == pytest.approx(7.8e-6) and new.oneshot_max_bytes == 64 * MIB
    assert old.oneshot_latency_s == 0.0 and old.oneshot_max_bytes == 0


def test_a_float16_model_leaves_the_shrunk_custom_kernel_for_nccl():
    # SymmMemCommunicator takes bfloat16 alone (`self.dtype = torch.bfloat16`, `if inp.dtype != self.dtype: return
    # False`: 0.11.0 symm_mem.py L51, L99; 0.33.0 L54, L120), but the custom kernel's limit shrinks wherever the
    # communicator is on (custom_all_reduce.py 0.11.0 L113-119) to min(CUSTOM_ALL_REDUCE_MAX_SIZES, 8 MiB)
    # (all_reduce_utils.py 0.11.0 L30-43; "10.3" 0.19.0 L44-49): so a float16 run's one-kernel limit is
    # H100 (9.0): tp 2 min(64 MiB, 8 MiB) = 8 MiB, tp 4 min(32, 8) = 8 MiB, tp 6 512 KiB, tp 8 256 KiB = 262,144 B;
    # B200 (10.0) tp 8 1 MiB; B300 (10.3, 0.19.0) tp 6 8 MiB, tp 8 4 MiB; unchanged where the communicator is off
    h100, b200, b300 = find_gpu("h100-sxm"), find_gpu("b200"), find_gpu("b300")
    fp16 = {"dtype": "fp16"}
    assert custom_allreduce_bytes("vllm", 2, h100, "0.11.0", **fp16) == 8 * MIB
    assert custom_allreduce_bytes("vllm", 4, h100, "0.11.0", **fp16) == 8 * MIB
    assert custom_allreduce_bytes("vllm", 6, h100, "0.11.0", **fp16) == 524_288
    assert custom_allreduce_bytes("vllm", 8, h100, "0.19.0", **fp16) == 262_144
    assert custom_allreduce_bytes("vllm", 8, b200, "0.17.0", **fp16) == 1 * MIB
    assert custom_allreduce_bytes("vllm", 6, b300, "0.19.0", **fp16) == 8 * MIB
    assert custom_allreduce_bytes("vllm", 8, b300, "0.19.0", **fp16) == 4 * MIB
    assert custom_allreduce_bytes("vllm", 8, b300, "0.18.0", **fp16) == 8 * MIB  # no "10.3" entry: communicator off
    assert custom_allreduce_bytes("vllm", 8, h100, "0.10.2", **fp16) == 8 * MIB  # off by default before 0.11.0
    assert custom_allreduce_bytes("vllm", 8, find_gpu("a100-sxm-80"), "0.19.0", **fp16) == 8 * MIB  # not in table
    assert custom_allreduce_bytes("vllm", 8, h100, "0.11.0", custom=False, **fp16) == 0  # NCCL from the first byte
    assert custom_allreduce_bytes("vllm", 8, h100, "0.11.0", dtype="bf16") == 64 * MIB
    assert custom_allreduce_bytes("sglang", 8, h100, "0.5.3", **fp16) == 8 * MIB  # SGLang's rule is its own


def test_the_shape_reads_the_dtype_the_run_computes_in():
    # the same model on 8 H100s at vLLM 0.19.0: its bf16 config all-reduces in bf16 (one kernel to 64 MiB); a run
    # stating --dtype half (compute "half") in fp16 (to 256 KiB, then the ring)
    import pytest

    from kvplan.sources.catalog import find_in_catalog
    from kvplan.speed.shape import custom_off, shape_for
    spec, h100 = find_in_catalog("llama-3.1-70b"), find_gpu("h100-sxm")
    assert spec.dtype == "bf16"
    bf16 = shape_for(spec, h100, tp=8, engine="vllm", version="0.19.0")
    half = shape_for(spec, h100, tp=8, engine="vllm", version="0.19.0", compute="half")
    assert (bf16.act_dtype, bf16.oneshot_max_bytes) == ("bf16", 64 * MIB)
    assert (half.act_dtype, half.oneshot_max_bytes) == ("fp16", 262_144)
    assert half.oneshot_latency_s == pytest.approx(bf16.oneshot_latency_s) and bf16.oneshot_latency_s > 0
    # --disable-custom-all-reduce: bf16 keeps the symmetric-memory kernel, fp16 has none left
    assert custom_off(bf16, "vllm", h100, "0.19.0").oneshot_max_bytes == 64 * MIB
    off = custom_off(half, "vllm", h100, "0.19.0")
    assert off.oneshot_max_bytes == 0 and off.oneshot_latency_s == 0.0


def test_b300_at_tp_2_takes_the_smaller_of_its_two_tables_in_bf16():
    # docs/speed.md's B300 tp 2 claim. all_reduce_utils.py 0.19.0 L44-49 CUSTOM_ALL_REDUCE_MAX_SIZES "10.3" {2: 4 MiB}
    # and L52-70 SYMM_MEM_ALL_REDUCE_MAX_SIZES "10.3" {2: 4 MB}: the custom kernel shrinks to min(4 MiB, 8 MiB) =
    # 4 MiB and the symmetric-memory all-reduce takes bf16 up to its table's 4 MiB, so NCCL's ring starts at 4 MiB =
    # 4,194,304 B, not the custom kernel's 8 MiB. 0.18.0's tables have no "10.3" entry (all_reduce_utils.py 0.17.0
    # L49-62, the same in 0.18.0): the communicator is off, the custom kernel keeps max_size=8192 * 1024 = 8 MiB
    b300 = find_gpu("b300")
    assert custom_allreduce_bytes("vllm", 2, b300, "0.19.0") == 4 * MIB
    assert custom_allreduce_bytes("vllm", 2, b300, "0.18.0") == 8 * MIB
