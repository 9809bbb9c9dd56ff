#!/usr/bin/env bash
# One-shot validation on a target GPU machine: runs kvplan's standard validation set on CUDA and
# appends every run to ONE results file (JSON), to gather with other machines' files into a report.
#
#   pip install 'kvplan[validate]'            # torch with CUDA for this machine
#   scripts/validate_gpu.sh [results-file.json] [cuda-device]
#
# Each run builds a real decoder (random weights, the model's real cache geometry), measures its
# cache, weights and peak with torch.cuda's allocator counters and compares them with kvplan's
# predictions; a run that fails a check is recorded (ok: false) and the script carries on, then
# exits non-zero at the end if any run failed. Sizes are chosen to fit a 24 GB GPU; on 80 GB and
# larger, set KVPLAN_VALIDATE_FULL=1 to also run full-width (unshrunk) models.
set -u
OUT="${1:-kvplan-validate-$(hostname)-$(date +%Y%m%d-%H%M%S).json}"
DEV="${2:-cuda}"
KVPLAN="${KVPLAN:-kvplan}"
failed=0

run() {
    echo ">>> kvplan validate $*" >&2
    "$KVPLAN" validate "$@" --device "$DEV" --output "$OUT" || failed=$((failed + 1))
}

# GQA (Llama 3.1 8B: 8 KV heads x 128), full widths, real dtype, 4 of 32 layers.
run llama-3.1-8b --batch 4 --ctx 4096 --layers 4
run llama-3.1-8b --batch 4 --ctx 4096 --layers 4 --kv-dtype fp8
# Sliding window 128 alternating with full attention (gpt-oss), contexts around the window.
run gpt-oss-20b --batch 2 --ctx 100 --layers 4 --shrink
run gpt-oss-20b --batch 2 --ctx 2048 --layers 4 --shrink
# Sliding window 512, 5 local : 1 global (Gemma 3).
run gemma-3-1b-it --batch 4 --ctx 2048 --layers 6
# Chunked local attention (Llama 4), 4 layers, shrunk experts.
run llama-4-scout-17b-16e-instruct --batch 1 --ctx 4096 --layers 4 --shrink
# MLA latent (DeepSeek V3: 512 + 64 per token), shrunk experts.
run deepseek-v3 --batch 2 --ctx 2048 --layers 4 --shrink
run deepseek-v2-lite --batch 4 --ctx 4096 --layers 4 --shrink --kv-dtype fp8
# Linear attention + full attention (Qwen3-Next), Mamba-2 + attention + MLP (Nemotron-H).
run qwen3-next-80b-a3b-thinking --batch 2 --ctx 1024 --layers 4 --shrink
run nemotron-h-56b-base-8k --batch 2 --ctx 256 --layers 8 --shrink
# MHA, fp16 and fp32 caches.
run llama-2-7b-hf --batch 2 --ctx 2048 --layers 4 --kv-dtype fp16
run qwen3-8b --batch 2 --ctx 2048 --layers 2 --kv-dtype fp32

if [ "${KVPLAN_VALIDATE_FULL:-0}" = "1" ]; then
    run llama-3.1-8b --batch 8 --ctx 8192       # every layer, full widths: checks the planner's own weights too
    run qwen3-8b --batch 4 --ctx 16384
fi

echo "results: $OUT ($failed failed run(s))" >&2
[ "$failed" -eq 0 ]
