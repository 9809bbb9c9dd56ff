#!/usr/bin/env bash
# One prepared GPU session for kvplan's speed work (issue 21, item 5), at most 8 minutes of wall time:
#   1. scripts/validate_gpu.sh on CUDA (kvplan validate's standard set: the CUDA path of validate, measured
#      against the planner), its results JSON and log kept;
#   2. prefill and decode step times of kvplan's own torch decoder (validate's model, random weights, full
#      widths, every layer) for a few batch sizes x contexts, CUDA events after warm-up
#      (kvplan step-times), written as speed-corpus YAML (tests/fixtures/speed/README.md
#      schema, engine kvplan-torch, first-party) to copy into tests/fixtures/speed/.
#
#   scripts/gpu_speed.sh [OUT_DIR]          # default: $OUT if set (the device runner's folder), else ./gpu-speed-HOST-TIME
#
# Needs torch with CUDA in the Python that runs kvplan (KVPLAN_PYTHON, default python3; `pip install -e
# '.[validate]'` with a CUDA torch). Every stage runs under its own timeout; a stage that fails or times out
# is recorded and the script goes on; the exit status is non-zero if any stage failed. Sizes fit an 80 GB
# GPU except the largest decode point (batch 64 x 8k of Llama 3.1 8B: 16 GB weights + 69 GB cache), which
# is refused up front on a smaller one (that model's file then says so in the log) - sized for an H200.
#
# Knobs (for a smoke test on a CPU, tests/test_steptime.py): GPU_SPEED_DEVICE (cuda), GPU_SPEED_POINTS
# ("MODEL|batches|contexts ..."), GPU_SPEED_STEPTIME_ARGS (extra steptime flags), GPU_SPEED_VALIDATE_S (0 skips
# validate_gpu.sh), GPU_SPEED_BUDGET_S (470).
set -u
OUT_DIR="${1:-${OUT:-./gpu-speed-$(hostname)-$(date +%Y%m%d-%H%M%S)}}"
PY="${KVPLAN_PYTHON:-python3}"
BUDGET="${GPU_SPEED_BUDGET_S:-470}"   # seconds for everything (8 minutes, less a margin)
VALIDATE_S="${GPU_SPEED_VALIDATE_S:-210}"
DEVICE="${GPU_SPEED_DEVICE:-cuda}"
POINTS="${GPU_SPEED_POINTS:-llama-3.1-8b|1,8,32,64|512,2048,8192 qwen3-8b|1,16,64|1024,4096 llama-3.2-1b-instruct|1,32,128|1024,8192}"
EXTRA="${GPU_SPEED_STEPTIME_ARGS:-}"
START=$SECONDS
failed=0
mkdir -p "$OUT_DIR" && OUT_DIR="$(cd "$OUT_DIR" && pwd)" || exit 2
cd "$(dirname "$0")/.." || exit 2

left() { echo $((BUDGET - (SECONDS - START))); }
say() { echo "[gpu_speed $(($SECONDS - START))s] $*" | tee -a "$OUT_DIR/gpu_speed.log" >&2; }

# 0. What the machine is; stop here without CUDA (nothing below means anything on a CPU).
(nvidia-smi || true) > "$OUT_DIR/nvidia-smi.txt" 2>&1
if ! timeout 120 "$PY" -c "import sys, torch, kvplan
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'kvplan', kvplan.__version__)
if '$DEVICE'.startswith('cuda'):
    assert torch.cuda.is_available(), 'CUDA is not available to torch'
    print('device', torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory)" \
    > "$OUT_DIR/environment.txt" 2>&1; then
    say "no CUDA torch + kvplan in $PY: $(tail -1 "$OUT_DIR/environment.txt")"
    exit 3
fi
say "$(tr '\n' ' ' < "$OUT_DIR/environment.txt")"

# The `kvplan` of that Python (KVPLAN to name another), for validate_gpu.sh and step-times.
KVPLAN_BIN="${KVPLAN:-}"
if [ -z "$KVPLAN_BIN" ]; then
    KVPLAN_BIN="$OUT_DIR/.kvplan"
    printf '#!/bin/sh\nexec "%s" -m kvplan "$@"\n' "$PY" > "$KVPLAN_BIN" && chmod +x "$KVPLAN_BIN"
fi

# 1. validate's standard set on CUDA (each run appends to one results file; a timeout keeps the runs done).
t=$(( $(left) < VALIDATE_S ? $(left) : VALIDATE_S ))
if [ "$t" -gt 0 ]; then
    say "validate_gpu.sh (timeout ${t}s)"
    KVPLAN="$KVPLAN_BIN" timeout --kill-after=10 "$t" scripts/validate_gpu.sh "$OUT_DIR/validate-$(hostname).json" \
        "$DEVICE" > "$OUT_DIR/validate.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || { failed=$((failed + 1)); say "validate_gpu.sh exit $rc (124: timed out; see validate.log)"; }
fi

# 2. Step times: MODEL|batches|contexts, full widths and every layer, bf16 weights (the checkpoints' dtype).
for point in $POINTS; do
    IFS='|' read -r model batches contexts <<< "$point"
    t=$(( $(left) < 150 ? $(left) : 150 ))
    if [ "$t" -lt 30 ]; then say "out of time: $model skipped"; failed=$((failed + 1)); continue; fi
    say "step times: $model batches $batches contexts $contexts (timeout ${t}s)"
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    timeout --kill-after=10 "$t" "$KVPLAN_BIN" step-times "$model" --device "$DEVICE" --batches "$batches" \
        --contexts "$contexts" --warmup 3 --repeats 10 --output "$OUT_DIR" $EXTRA >> "$OUT_DIR/steptime.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || { failed=$((failed + 1)); say "$model: exit $rc (see steptime.log)"; }
done

rm -f "$OUT_DIR/.kvplan"
say "done: $failed stage(s) failed; files in $OUT_DIR: $(ls "$OUT_DIR" | tr '\n' ' ')"
[ "$failed" -eq 0 ]
