#!/usr/bin/env bash
# A rehearsal of the GPU visit on this machine: builds a simulated bare GPU machine from the
# package index (a Python environment holding what the GPU machines hold: torch 2.11 (CUDA 13
# build), torchvision 0.26, numpy, pandas, matplotlib, scipy, mpi4py, nvidia-ml-py, NCCL's pip
# package, CMake 4 from pip and, for the CUDA flavour of the Horovod build, pip's nvcc, CUDA
# runtime and CCCL headers; no Ray, Horovod or ruptures), makes the bundle with scripts/gpu-bundle.sh, then runs
# the visit's two commands exactly as the README's plan has them, with no network (a network
# namespace with only loopback up; a CUDA toolkit this machine has is hidden there, as the GPU
# machines' nvcc is pip's) and --device cpu:
#
#   1. scripts/gpu-check.sh BUNDLE --install-only        (install and Horovod's build)
#   2. scripts/gpu-check.sh BUNDLE OUT --device cpu     (the measuring steps)
#
# and prints each command's time and exit status, and the summary's steps table. It downloads
# several GB once (pip's cache keeps them); not part of `make test`: `make gpu-rehearsal`.
#
#   scripts/gpu-rehearsal.sh WORK [--python PYTHON] [--cpu-flavour]
#
# --python: the interpreter of the simulated machine (default: python3.12 where there is one,
# else python3; the summary says which). --cpu-flavour: build Horovod's CPU flavour even where
# pip's nvcc is present (the default forces the CUDA flavour for compute capability 9.0, as on
# an H100/H200, where a toolkit could be installed).
set -uo pipefail

die() { echo "gpu-rehearsal: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 WORK [--python PYTHON] [--cpu-flavour]"
WORK=$1; shift
runs() { "$1" -c 'import sys' >/dev/null 2>&1; }  # a pyenv shim can exist and still not run
PY=
for candidate in python3.12 python3; do
  if command -v "$candidate" >/dev/null && runs "$candidate"; then PY=$(command -v "$candidate"); break; fi
done
FLAVOUR=cuda
while [[ $# -gt 0 ]]; do
  case $1 in
    --python) [[ -n ${2:-} ]] && command -v "$2" >/dev/null && runs "$2" || die "--python: no interpreter '${2:-}' that runs"; PY=$(command -v "$2"); shift 2 ;;
    --cpu-flavour) FLAVOUR=cpu; shift ;;
    *) die "$1: unknown option; allowed: --python, --cpu-flavour" ;;
  esac
done
[[ -n $PY ]] || die "no python3.12 or python3 that runs; --python picks one"
command -v unshare >/dev/null && command -v ip >/dev/null || die "needs unshare and ip (util-linux, iproute2)"
[[ $(id -u) -eq 0 ]] || die "needs root for a network namespace (unshare -n)"
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
VER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
MACHINE=$WORK/machine-py$VER     # the simulated GPU machine's own Python environment
BUNDLE=$WORK/bundle
OUT=$WORK/out
LOG=$WORK/rehearsal.log
: >"$LOG"
step() { echo "gpu-rehearsal: $*" | tee -a "$LOG"; }
[[ $VER == 3.12 ]] || step "note: Python $VER, not the GPU machines' 3.12 (no python3.12 here; --python picks one)"

SECONDS=0
if [[ ! -x $MACHINE/bin/python ]]; then
  step "building the simulated machine's environment (Python $VER) from the package index"
  "$PY" -m venv "$MACHINE" >>"$LOG" 2>&1 || die "venv failed (see $LOG)"
fi
MPIP=("$MACHINE/bin/python" -m pip --disable-pip-version-check)
"${MPIP[@]}" install -q torch==2.11.0 torchvision==0.26.0 numpy pandas matplotlib scipy mpi4py \
  nvidia-ml-py nvidia-nccl-cu13 "cmake>=4,<5" >>"$LOG" 2>&1 \
  || die "installing the simulated machine's packages failed (see $LOG)"
if [[ $FLAVOUR == cuda ]]; then
  "${MPIP[@]}" install -q nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl >>"$LOG" 2>&1 \
    || { step "no pip nvcc to be had: the CPU flavour is built"; FLAVOUR=cpu; }
fi
step "machine ready in ${SECONDS}s: $("$MACHINE/bin/python" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'), $("$MACHINE/bin/cmake" --version | head -n 1)"

SECONDS=0
rm -rf "$BUNDLE"
PIP="$PY -m pip" bash "$HERE/scripts/gpu-bundle.sh" "$BUNDLE" --python-version "$VER" --no-ray \
  >>"$LOG" 2>&1 || die "gpu-bundle.sh failed (see $LOG)"
step "bundle made in ${SECONDS}s: $(tail -n 1 "$LOG")"

# The visit itself: no network, the machine's Python and its pip-installed cmake first on PATH,
# a fresh work folder and Horovod cache (a visit starts bare).
rm -rf "$WORK/check" "$WORK/cache" "$OUT"
export HIDE_KEEP=$MACHINE  # pip's nvcc, inside the simulated machine, stays
CC=()
[[ $FLAVOUR == cuda ]] && CC=(SCALEBENCH_CUDA_CC=90)
visit() {  # args: the command's words after gpu-check.sh
  local start code
  start=$(date +%s)
  # A GPU machine's nvcc comes from pip: a toolkit this machine has (/usr/local/cuda, an nvcc
  # on PATH) is hidden inside the namespace, so the build must find pip's.
  unshare -n -m bash -c 'ip link set lo up
    empty=$(mktemp -d); : >"$empty/none"
    [[ -e /usr/local/cuda ]] && mount --bind "$empty" "$(readlink -f /usr/local/cuda)"
    for nvcc in $(which -a nvcc 2>/dev/null); do [[ $nvcc == "$HIDE_KEEP"/* ]] || mount --bind "$empty/none" "$nvcc"; done
    exec "$@"' visit \
    env PATH="$MACHINE/bin:$PATH" PYTHON="$MACHINE/bin/python" SCALEBENCH_CHECK_WORK="$WORK/check" \
    SCALEBENCH_CACHE="$WORK/cache" SCALEBENCH_HOROVOD_FLAVOUR=$FLAVOUR "${CC[@]}" \
    bash "$HERE/scripts/gpu-check.sh" "$@" >>"$LOG" 2>&1
  code=$?
  step "gpu-check.sh $* : exit $code in $(( $(date +%s) - start )) s"
  return 0
}
visit "$BUNDLE" --install-only
visit "$BUNDLE" "$OUT" --device cpu
if [[ -f $OUT/summary.md ]]; then
  echo "gpu-rehearsal: the summary's steps and Horovod line:"
  sed -n '/^## Steps/,/^Horovod:/p' "$OUT/summary.md"
  grep -m1 '^Exit status' "$OUT/summary.md"
fi
echo "gpu-rehearsal: everything in $LOG and $OUT"
