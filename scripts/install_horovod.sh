#!/usr/bin/env bash
# Install Horovod 0.28.1 (PyTorch + Gloo, no MPI/TF/MXNet) into a virtualenv,
# building it from the sdist once and caching the wheel.
#
#   bash scripts/install_horovod.sh VENV_DIR [--force | --configure-only | --cache-only]
#
# --force reinstalls even if horovod already imports (from the cached wheel when
# there is one); to rebuild, delete the cache directory printed for the wheel.
# --configure-only runs CMake's configure step on the patched source the way Horovod's
# setup.py does (same environment, same arguments) and stops: a check that this CMake
# accepts the build, in seconds instead of minutes.
# --cache-only installs the cached wheel if there is one and exits 3 if there is none.
# CMake 3.x and 4.x both build it: CMake 4 refuses cmake_minimum_required below 3.5 (Horovod's
# bundled gloo asks for 2.8.12) unless CMAKE_POLICY_VERSION_MINIMUM is set, which this script
# does; CMake 3 ignores it. The build runs with make -j<cores> (MAKEFLAGS).
# SCALEBENCH_HOROVOD=system  only check that the venv's own horovod.torch imports.
# SCALEBENCH_CACHE           cache root (default ~/.cache/scalebench); wheels and
#                            build logs go to $SCALEBENCH_CACHE/wheels/.
# SCALEBENCH_HOROVOD_SDIST   a local horovod-0.28.1.tar.gz instead of PyPI's (offline builds;
#                            with PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR pip finds the rest in DIR).
# SCALEBENCH_HOROVOD_FLAVOUR cpu or cuda (default: cuda where nvidia-smi lists a GPU).
# SCALEBENCH_CUDA_CC         compute capabilities to build for, e.g. 90 or 80,90 (default:
#                            the GPUs' own, from nvidia-smi).
set -euo pipefail

HVD_VERSION=0.28.1
usage() { echo "usage: $0 VENV_DIR [--force | --configure-only | --cache-only]" >&2; exit 2; }
die() { echo "horovod: error: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || usage
[[ -d $1 ]] || die "no virtualenv at $1"
VENV=$(cd "$1" && pwd)
FORCE=0 MODE=install
if [[ $# -eq 2 ]]; then
  case $2 in
    --force) FORCE=1 ;;
    --configure-only) MODE=configure ;;
    --cache-only) MODE=cache ;;
    *) usage ;;
  esac
fi
PY=$VENV/bin/python
[[ -x $PY ]] || die "no python at $PY"

if [[ ${SCALEBENCH_HOROVOD:-} == system ]]; then
  if out=$("$PY" -c 'import horovod, horovod.torch; print(horovod.__version__, horovod.__file__)' 2>&1); then
    echo "horovod: using system installation: $out"; exit 0
  fi
  die "SCALEBENCH_HOROVOD=system but 'import horovod.torch' fails in $PY: $(tail -n 3 <<<"$out")"
fi

installed() {  # in this venv: its own horovodrun beside its python, not one seen through a path
  [[ -x $VENV/bin/horovodrun ]] || return 1
  "$PY" - "$HVD_VERSION" <<'EOF' 2>/dev/null
import sys, horovod, horovod.torch
assert horovod.__version__ == sys.argv[1]
print(horovod.__version__, horovod.__file__)
EOF
}
if [[ $FORCE == 0 && $MODE != configure ]] && out=$(installed); then
  echo "horovod: already installed ($out)"; exit 0
fi

# The smallest change that builds against torch 2.14 (its headers need C++20).
# Each line: file <TAB> sed expression. Its sha256 is part of the cache key.
PATCH=$'CMakeLists.txt\ts/^set(CMAKE_CXX_STANDARD 14)$/set(CMAKE_CXX_STANDARD 17)/
horovod/torch/CMakeLists.txt\ts/^    set(CMAKE_CXX_STANDARD 14)$/    set(CMAKE_CXX_STANDARD 20)/'
PATCH_HASH=$(printf '%s\n' "$PATCH" | sha256sum | cut -c1-8)

TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__)') || die "torch does not import in $PY"
FLAVOUR=cpu
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then FLAVOUR=cuda; fi
FLAVOUR=${SCALEBENCH_HOROVOD_FLAVOUR:-$FLAVOUR}
[[ $FLAVOUR == cpu || $FLAVOUR == cuda ]] || { echo "SCALEBENCH_HOROVOD_FLAVOUR: cpu or cuda, not $FLAVOUR" >&2; exit 2; }
CC_LIST=
if [[ $FLAVOUR == cuda ]]; then
  CC_LIST=${SCALEBENCH_CUDA_CC:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d . | sort -u | paste -sd,)}
  [[ $CC_LIST =~ ^[0-9]+(,[0-9]+)*$ ]] || die "no compute capability (nvidia-smi gave '$CC_LIST'); set SCALEBENCH_CUDA_CC, e.g. 90"
fi
KEY="horovod-$HVD_VERSION-torch$(tr -c 'A-Za-z0-9.\n' _ <<<"$TORCH_VERSION")-p$PATCH_HASH-$FLAVOUR${CC_LIST:+-cc${CC_LIST//,/_}}"
WHEELS=${SCALEBENCH_CACHE:-$HOME/.cache/scalebench}/wheels
CACHE_DIR=$WHEELS/$KEY
LOG=$WHEELS/$KEY.build.log
mkdir -p "$WHEELS"

# The lines that say why a build failed: CMake's errors with the lines under them, the
# compiler's and the linker's, make's; the first few only, since later ones follow from them.
first_errors() {
  grep -n -m 12 -A 3 -E 'CMake Error|error:|Error [0-9]+|fatal error|undefined reference|Could NOT find|RuntimeError|No such file' "$1" 2>/dev/null | head -n 40
}
fail() {
  echo "horovod: error: $* (log: $LOG)" >&2
  local errors
  errors=$(first_errors "$LOG")
  if [[ -n $errors ]]; then
    echo "horovod: the first errors in the log (with their line numbers):" >&2
    echo "$errors" >&2
  fi
  echo "horovod: the last lines of the log:" >&2
  tail -n 30 "$LOG" >&2
  exit 1
}
pip_install() { "$PY" -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1 || fail "pip install $* failed"; }

verify() {
  local out
  out=$("$VENV/bin/horovodrun" --check-build 2>&1) || die "horovodrun --check-build failed: $out"
  if ! grep -q '\[X\] PyTorch' <<<"$out" || ! grep -q '\[X\] Gloo' <<<"$out"; then
    die "build lacks PyTorch/Gloo support: $out"
  fi
  if [[ $FLAVOUR == cuda ]] && ! grep -q '\[X\] NCCL' <<<"$out"; then
    die "a CUDA build without NCCL operations: $out"
  fi
}

RUNTIME_DEPS=(cloudpickle psutil pyyaml packaging 'cffi>=1.4.0')
SECONDS=0
shopt -s nullglob
cached=("$CACHE_DIR"/horovod-"$HVD_VERSION"-*.whl)
if [[ ${#cached[@]} -gt 0 && $MODE != configure ]]; then
  pip_install "${RUNTIME_DEPS[@]}"
  pip_install --no-deps --force-reinstall "${cached[0]}"
  verify
  echo "horovod: installed from cache in ${SECONDS}s (${cached[0]})"
  exit 0
fi

if [[ $MODE == cache ]]; then echo "horovod: no cached wheel for $KEY under $WHEELS" >&2; exit 3; fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "horovod: building $KEY"
echo "horovod: build log: $LOG"
: >"$LOG"

# Build deps for --no-build-isolation: setup.py's setup_requires is its install_requires.
BUILD_DEPS=(setuptools wheel "${RUNTIME_DEPS[@]}")
cmake --version >/dev/null 2>&1 || BUILD_DEPS+=(cmake)
pip_install "${BUILD_DEPS[@]}"

if [[ -n ${SCALEBENCH_HOROVOD_SDIST:-} ]]; then
  cp "$SCALEBENCH_HOROVOD_SDIST" "$TMP/horovod-$HVD_VERSION.tar.gz" || fail "no sdist at $SCALEBENCH_HOROVOD_SDIST"
else
  "$PY" -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
    "horovod==$HVD_VERSION" -d "$TMP" >>"$LOG" 2>&1 || fail "pip download failed"
fi
tar -xzf "$TMP/horovod-$HVD_VERSION.tar.gz" -C "$TMP"
SRC=$TMP/horovod-$HVD_VERSION
while IFS=$'\t' read -r file expr; do
  cp "$SRC/$file" "$TMP/orig"
  sed -i "$expr" "$SRC/$file"
  ! cmp -s "$SRC/$file" "$TMP/orig" || fail "patch '$expr' changed nothing in $file"
done <<<"$PATCH"

MAKEFLAGS=-j$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc obeys OMP_NUM_THREADS
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}
export MAKEFLAGS HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo
# A CUDA build of torch makes Horovod add CUDA even for the CPU flavour. Without
# CUDA_HOME torch guesses the toolkit from `which nvcc`, and CMake takes its root
# from nvcc's directory: a wrapper /usr/local/bin/nvcc makes that /usr/local and
# CUDAToolkit is not found. HOROVOD_CUDA_HOME pins CMake's nvcc to the real one.
# The toolkit's root: $CUDA_HOME, /usr/local/cuda, the real nvcc's on PATH, else one a pip
# package put beside the environment's packages (nvidia-cuda-nvcc: site-packages/nvidia/cu13
# or nvidia/cuda_nvcc); the first that holds bin/nvcc and include/cuda_runtime.h.
# cuda_root prints "ROOT<TAB>where it was found".
pip_nvcc_roots() {
  "$PY" - <<'PYEOF' 2>/dev/null
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
for base in nvidia.__path__:
    for nvcc in sorted(glob.glob(os.path.join(base, "*", "bin", "nvcc"))):
        print(os.path.dirname(os.path.dirname(nvcc)))
PYEOF
}
cuda_candidates() {
  local nvcc
  printf '%s\tCUDA_HOME\n' "${CUDA_HOME:-}"
  printf '/usr/local/cuda\t/usr/local/cuda\n'
  if nvcc=$(command -v nvcc 2>/dev/null); then
    nvcc=$(readlink -f "$nvcc")
    printf '%s\tnvcc on PATH\n' "$(dirname "$(dirname "$nvcc")")"
  fi
  pip_nvcc_roots | sed 's/$/\tthe nvidia-cuda-nvcc pip package/'
}
cuda_root() {
  local c where
  while IFS=$'\t' read -r c where; do
    if [[ -n $c && -x $c/bin/nvcc && -f $c/include/cuda_runtime.h ]]; then
      # CUDA 12.x/13.x headers include <nv/target> (CCCL): pip's nvcc and runtime come without it
      # (package nvidia-cuda-cccl), and the build would fail minutes in, at the first .cu file
      if grep -q '<nv/target>' "$c/include/cuda_fp16.h" 2>/dev/null \
          && [[ ! -e $c/include/nv/target && ! -e $c/include/cccl/nv/target ]]; then
        echo "horovod: the CUDA toolkit at $c ($where) lacks CCCL's headers (include/cccl/nv/target); pip install nvidia-cuda-cccl (the toolkit's version) or set CUDA_HOME" >&2
        continue
      fi
      printf '%s\t%s\n' "$c" "$where"; return 0
    fi
  done < <(cuda_candidates)
  return 1
}
if [[ -n ${CUDA_HOME:-} || -d /usr/local/cuda || $FLAVOUR == cuda || -n $(pip_nvcc_roots) ]]; then
  if found=$(cuda_root); then
    CUDA_HOME=${found%%$'\t'*}
    echo "horovod: CUDA toolkit: $CUDA_HOME (found through ${found#*$'\t'})"
  else
    [[ $FLAVOUR == cuda ]] && die "no CUDA toolkit (nvcc with include/cuda_runtime.h and CCCL's headers) in CUDA_HOME, /usr/local/cuda, PATH or the nvidia-cuda-nvcc pip package: set CUDA_HOME"
    CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  fi
  export CUDA_HOME
  export HOROVOD_CUDA_HOME=${HOROVOD_CUDA_HOME:-$CUDA_HOME}
  # pip's toolkit (nvidia/cu13) ships libcudart.so.13 and no libcudart.so, so CMake's
  # find_library(cudart) finds nothing ("Could NOT find CUDAToolkit (missing: CUDA_CUDART)"):
  # unversioned links to its libraries in a folder of their own, on CMAKE_LIBRARY_PATH.
  if [[ -d $CUDA_HOME/lib && ! -e $CUDA_HOME/lib/libcudart.so && ! -e $CUDA_HOME/lib64/libcudart.so ]] \
      && compgen -G "$CUDA_HOME/lib/libcudart.so.*" >/dev/null; then
    mkdir -p "$TMP/cuda-lib"
    for lib in "$CUDA_HOME"/lib/lib*.so.* "$CUDA_HOME"/lib/lib*.a; do
      [[ -e $lib ]] || continue
      name=${lib##*/}; name=${name%%.so.*}; [[ $lib == *.a ]] && name=${lib##*/} || name=$name.so
      [[ -e $TMP/cuda-lib/$name ]] || ln -s "$lib" "$TMP/cuda-lib/$name"
    done
    export CMAKE_LIBRARY_PATH=$TMP/cuda-lib${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}
    echo "horovod: CUDA libraries without unversioned names: linked in $TMP/cuda-lib"
  fi
fi
if [[ $FLAVOUR == cuda ]]; then
  # Built here without a GPU for compute capability 9.0 (SCALEBENCH_HOROVOD_FLAVOUR=cuda
  # SCALEBENCH_CUDA_CC=90); not yet run on a GPU.
  NCCL=$("$PY" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])') || fail "no nvidia-nccl package in the venv"
  [[ -f $NCCL/include/nccl.h && -f $NCCL/lib/libnccl.so.2 ]] || fail "no nccl.h or libnccl.so.2 under $NCCL"
  mkdir -p "$TMP/nccl-lib"
  ln -s "$NCCL/lib/libnccl.so.2" "$TMP/nccl-lib/libnccl.so"
  export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
    HOROVOD_NCCL_HOME=$NCCL HOROVOD_NCCL_INCLUDE=$NCCL/include HOROVOD_NCCL_LIB=$TMP/nccl-lib \
    HOROVOD_BUILD_CUDA_CC_LIST=$CC_LIST
fi
env | grep -E '^(HOROVOD_|CUDA_HOME|MAKEFLAGS|CMAKE_POLICY|CMAKE_LIBRARY_PATH)' >>"$LOG"
echo "cmake: $(command -v cmake): $(cmake --version | head -n 1)" >>"$LOG"

if [[ $MODE == configure ]]; then
  # What setup.py's build_extensions runs first, with its arguments.
  mkdir -p "$TMP/configure"
  (cd "$TMP/configure" && cmake "$SRC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     "-DCMAKE_LIBRARY_OUTPUT_DIRECTORY_RELWITHDEBINFO=$TMP/configure/lib" \
     "-DPYTHON_EXECUTABLE:FILEPATH=$PY") >>"$LOG" 2>&1 \
    || fail "cmake's configure step failed ($(cmake --version | head -n 1))"
  echo "horovod: configure step passed with $(cmake --version | head -n 1) in ${SECONDS}s"
  exit 0
fi

(cd "$SRC" && "$PY" -m pip wheel -v --disable-pip-version-check --no-build-isolation --no-deps -w "$TMP/dist" .) \
  >>"$LOG" 2>&1 || fail "build failed"
built=("$TMP"/dist/horovod-"$HVD_VERSION"-*.whl)
[[ ${#built[@]} -eq 1 ]] || fail "expected one wheel in $TMP/dist"
mkdir -p "$CACHE_DIR"
cp "${built[0]}" "$CACHE_DIR/.part" && mv "$CACHE_DIR/.part" "$CACHE_DIR/${built[0]##*/}"
pip_install --no-deps --force-reinstall "$CACHE_DIR/${built[0]##*/}"
verify
echo "horovod: built in ${SECONDS}s (cached as $CACHE_DIR/${built[0]##*/})"
