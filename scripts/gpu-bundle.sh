#!/usr/bin/env bash
# Fill DIR with what a GPU machine without network lacks for scripts/gpu-check.sh: the wheels
# scalebench needs there (ruptures, Horovod's runtime and build dependencies, pip, setuptools,
# nvidia-ml-py) for its Python, Horovod 0.28.1's source (install_horovod.sh applies the build
# fix; checked here that it applies), and Ray Train's wheels only if the whole folder stays
# within the size limit. Run where the package index is reachable. Prints the folder's size.
#
#   scripts/gpu-bundle.sh DIR [--python-version 3.12] [--platform manylinux_2_28_x86_64]
#                             [--limit-mib 60] [--no-ray]
#
# The GPU machine is expected to hold torch, torchvision, numpy, pandas, matplotlib, scipy and
# NCCL's pip package already (they are never bundled: the check never replaces the machine's
# torch). PIP picks the pip to download with (default: python3 -m pip).
set -euo pipefail

usage() { echo "usage: $0 DIR [--python-version X.Y] [--platform TAG] [--limit-mib N] [--no-ray]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
DIR=$1; shift
PYVER=3.12 PLATFORM=manylinux_2_28_x86_64 LIMIT_MIB=60 RAY=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --python-version) [[ ${2:-} =~ ^3\.[0-9]+$ ]] || { echo "--python-version: X.Y, e.g. 3.12, not '${2:-}'" >&2; exit 2; }; PYVER=$2; shift 2 ;;
    --platform) [[ -n ${2:-} ]] || usage; PLATFORM=$2; shift 2 ;;
    --limit-mib) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "--limit-mib: a whole number of MiB, not '${2:-}'" >&2; exit 2; }; LIMIT_MIB=$2; shift 2 ;;
    --no-ray) RAY=0; shift ;;
    *) echo "$1: unknown option; allowed: --python-version, --platform, --limit-mib, --no-ray" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
read -r -a PIP <<<"${PIP:-python3 -m pip}"
HVD_VERSION=0.28.1
RAY_VERSION=2.60.0
ABI=cp${PYVER/./}
# Pure-Python or binary wheels the check installs (--no-deps: each dependency named here).
WHEELS=(
  "ruptures>=1.1.10,<1.2"                                   # history detect
  psutil cloudpickle pyyaml packaging cffi pycparser        # Horovod at run time
  pip setuptools wheel                                      # Horovod's build (--no-build-isolation)
  nvidia-ml-py                                              # energy and topology (NVML)
)

mkdir -p "$DIR/wheels"
DIR=$(cd "$DIR" && pwd)
SECONDS=0
download() {  # args: destination, requirements...
  local dest=$1; shift
  "${PIP[@]}" download --disable-pip-version-check -q --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "$ABI" --abi abi3 --abi none \
    --platform "$PLATFORM" --platform manylinux2014_x86_64 --platform any \
    -d "$dest" "$@"
}
download "$DIR/wheels" "${WHEELS[@]}"
"${PIP[@]}" download --disable-pip-version-check -q --no-deps --no-binary :all: \
  "horovod==$HVD_VERSION" -d "$DIR"
# The build fix must apply to exactly this source (install_horovod.sh fails otherwise).
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
tar -xzf "$DIR/horovod-$HVD_VERSION.tar.gz" -C "$TMP"
grep -qx 'set(CMAKE_CXX_STANDARD 14)' "$TMP/horovod-$HVD_VERSION/CMakeLists.txt" \
  || { echo "gpu-bundle: Horovod's CMakeLists.txt no longer sets C++14; the build fix would not apply" >&2; exit 1; }

size_mib() { du -sm "$1" | cut -f1; }
ray_note="not requested (--no-ray)"
if [[ $RAY == 1 ]]; then
  # Ray Train and the dependencies the GPU machine lacks; kept only if the folder fits.
  if download "$TMP/ray" "ray==$RAY_VERSION" "pyarrow" "fsspec" "tensorboardX" "protobuf" \
      "msgpack" "click" "filelock" "jsonschema" "aiosignal" "frozenlist" "requests" 2>"$TMP/ray.log"; then
    total=$(( $(size_mib "$DIR") + $(size_mib "$TMP/ray") ))
    if (( total <= LIMIT_MIB )); then
      mkdir -p "$DIR/ray" && mv "$TMP/ray"/* "$DIR/ray/"
      ray_note="included ($(size_mib "$DIR/ray") MiB)"
    else
      ray_note="not included: Ray $RAY_VERSION's wheels are $(size_mib "$TMP/ray") MiB, the folder would be $total MiB (limit $LIMIT_MIB)"
    fi
  else
    ray_note="not included: downloading Ray's wheels failed ($(tail -n 1 "$TMP/ray.log"))"
  fi
fi
{
  echo "python=$PYVER"
  echo "platform=$PLATFORM"
  echo "horovod=$HVD_VERSION"
  echo "ray=$ray_note"
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$DIR/manifest.txt"
size=$(size_mib "$DIR")
echo "gpu-bundle: $DIR: $size MiB ($(du -sk "$DIR" | cut -f1) KiB), $(ls "$DIR/wheels" | wc -l) wheels, Horovod $HVD_VERSION source; Ray: $ray_note; ${SECONDS}s"
(( size <= LIMIT_MIB )) || { echo "gpu-bundle: $size MiB is over the limit of $LIMIT_MIB MiB" >&2; exit 1; }
