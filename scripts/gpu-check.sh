#!/usr/bin/env bash
# One prepared check on a machine with one CUDA GPU (under 8 minutes): environment, framework
# availability, Horovod's NCCL build, one worker of each model under each framework at native
# size in fp32 and bf16 (warm-up 5, 3 trials), and the harness-overhead benchmark on the GPU.
# Everything lands in one folder. Usage: scripts/gpu-check.sh [OUT_DIR] (default results/gpu-check)
# PYTHON picks the interpreter (default: python3); the environment must already hold scalebench,
# torch, and optionally horovod and ray.
set -uo pipefail
OUT=${1:-results/gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/check.log"; }
start=$(date +%s)

log "environment"
$PY -m scalebench env --device cuda > "$OUT/env.json" 2>> "$OUT/check.log"
cat "$OUT/env.json"
log "frameworks"
$PY -m scalebench list 2>&1 | tee "$OUT/list.txt"
log "horovod build"
$PY - <<'PY' 2>&1 | tee "$OUT/horovod-build.txt"
try:
    import horovod.torch as hvd
    print({"nccl": hvd.nccl_built(), "gloo": hvd.gloo_built(), "cuda": hvd.cuda_built()})
except Exception as exc:  # noqa: BLE001 - a missing Horovod is a finding, not a crash
    print(f"horovod unavailable: {type(exc).__name__}: {exc}")
PY
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
    > "$OUT/nvidia-smi.csv" 2>&1

log "one worker, native sizes, fp32 and bf16, every framework"
timeout 400 $PY -m scalebench sweep --device cuda --workers 1 \
    --models resnet101,inception_v3,vgg16 --frameworks ddp,horovod,ray \
    --precision fp32,bf16 --batch-size 64 --warmup 5 --iters 5 --trials 3 --timeout 90 \
    --quiet --out "$OUT/sweep" 2>&1 | tee "$OUT/sweep.log"

log "harness overhead on the GPU"
timeout 60 $PY benchmarks/harness_overhead.py --device cuda --model resnet101 --image-size 224 \
    --batch-size 64 --warmup 5 --iters 5 --trials 3 --rounds 2 2>&1 | tee "$OUT/overhead.txt"

log "done in $(( $(date +%s) - start )) s; everything is in $OUT"
