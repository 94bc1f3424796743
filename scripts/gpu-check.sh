#!/usr/bin/env bash
# The first check of scalebench on a GPU machine without network, as two commands, each within
# a 10-minute limit:
#
#   scripts/gpu-check.sh BUNDLE --install-only [--horovod-box SECONDS]      (1 and 2, ~4-6 min)
#   scripts/gpu-check.sh BUNDLE OUT [--device cuda|cpu] [--budget SECONDS] [--horovod-box SECONDS]
#                                                                          (1 to 3, ~6 min)
#
# BUNDLE is what scripts/gpu-bundle.sh prepared (where the package index is reachable). With
# nothing but python3 and the bundle, this
#   1. installs the bundle's wheels offline (pip --no-index) into a private environment that sees
#      the machine's own packages (torch, torchvision, numpy, ...) but never changes them;
#      once per bundle: the measuring command after --install-only finds them installed;
#   2. builds Horovod 0.28.1 from the bundle's source with NCCL for the GPU's compute capability
#      (scripts/install_horovod.sh, make -j<all cores>; the built wheel is cached) within a time
#      box: --install-only gives the build a box of its own (default 540 s); the measuring
#      command then installs the cached wheel in seconds, and builds (within 2/5 of its budget)
#      only where no --install-only ran before it. A build that failed is not tried again by the
#      measuring command. If the box runs out or the build fails, Horovod's steps are skipped, and
#      summary.md shows the build's first errors and last lines;
#   3. runs scripts/gpu_check.py under the rest of the budget: environment and topology; every
#      model at its native size, batch 64, one worker, under DDP and Horovod in fp32 with TF32 on
#      and off, bf16 and fp16; MFU; harness vs a bare PyTorch loop; energy; vetting's per-GPU
#      probes; in order of value, skipping (and naming) what no longer fits.
# OUT receives at most 7 files: summary.md (read it first), results.jsonl, summary.csv,
# report.html, env.json, check.log, build.log (both commands' install and Horovod's whole build
# log, or its first and last 400 lines when longer). --device cpu runs the same steps on this
# machine's CPU (gloo, small sizes). PYTHON picks the interpreter (default python3);
# SCALEBENCH_CHECK_WORK the private environment and run folders (default
# ${TMPDIR:-/tmp}/scalebench-gpu-check); SCALEBENCH_CACHE where the built Horovod is cached.
#
# Exit status (a script can tell "all ran" from "ran, but Horovod did not"):
#   0  every planned step ran and was ok (Horovod built, where a build was planned)
#   1  a step failed, or the install failed before any measuring
#   2  bad arguments
#   3  Horovod was planned but is not usable: its build failed or ran out of its box (the other
#      steps ran; with --install-only: the install is done, the build is not)
#   4  a step was skipped because the budget ran out (nothing failed, Horovod built)
# 1 wins over 3, 3 over 4.
set -uo pipefail

die() { echo "gpu-check: $*" >&2; exit 2; }
usage() { die "usage: $0 BUNDLE OUT [--device cuda|cpu] [--budget SECONDS] [--horovod-box SECONDS] | $0 BUNDLE --install-only"; }
[[ $# -ge 2 ]] || usage
BUNDLE=$1; shift
[[ -d $BUNDLE/wheels ]] || die "BUNDLE: $BUNDLE holds no wheels/ folder; make one with scripts/gpu-bundle.sh"
BUNDLE=$(cd "$BUNDLE" && pwd)
INSTALL_ONLY=0 OUT=
if [[ $1 == --install-only ]]; then INSTALL_ONLY=1; shift; else OUT=$1; shift; fi
DEVICE=cuda BUDGET= BOX=
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) [[ ${2:-} == cuda || ${2:-} == cpu ]] || die "--device: cuda or cpu, not '${2:-}'"; DEVICE=$2; shift 2 ;;
    --budget) [[ ${2:-} =~ ^[0-9]+$ && ${2:-0} -ge 30 ]] || die "--budget: whole seconds >= 30, not '${2:-}'"; BUDGET=$2; shift 2 ;;
    --horovod-box) [[ ${2:-} =~ ^[0-9]+$ ]] || die "--horovod-box: whole seconds (0: no build), not '${2:-}'"; BOX=$2; shift 2 ;;
    *) die "$1: unknown option; allowed: --device, --budget, --horovod-box" ;;
  esac
done
if [[ $DEVICE == cuda && $INSTALL_ONLY == 0 ]] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  die "--device cuda: nvidia-smi lists no GPU on this machine; --device cpu runs the same steps on the CPU"
fi
# The whole check: 360 s on a GPU; the CPU check uses small sizes and 150 s.
BUDGET=${BUDGET:-$([[ $DEVICE == cuda ]] && echo 360 || echo 150)}
if [[ $INSTALL_ONLY == 1 ]]; then BOX=${BOX:-540}; else BOX=${BOX:-$(( BUDGET * 2 / 5 ))}; fi
START=$(date +%s)
DEADLINE=$(( START + BUDGET ))
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || die "PYTHON: no interpreter '$PY'"
VER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")') || die "PYTHON: '$PY' does not run"
WANT=$(sed -n 's/^python=//p' "$BUNDLE/manifest.txt" 2>/dev/null)
[[ -z $WANT || $WANT == "$VER" ]] || die "BUNDLE: made for Python $WANT, this machine's $PY is $VER; run scripts/gpu-bundle.sh DIR --python-version $VER"
WORK=${SCALEBENCH_CHECK_WORK:-${TMPDIR:-/tmp}/scalebench-gpu-check}
PRIV=$WORK/env-py$VER
mkdir -p "$WORK"
STATUS=$WORK/horovod-status.txt      # one line: built / installed / not built / skipped: why
ERRORS=$WORK/horovod-errors.txt      # a failed build's first errors and last lines
INSTALL_LOG=$WORK/install-only.log   # what --install-only did, carried into OUT/build.log
if [[ $INSTALL_ONLY == 1 ]]; then
  LOG=$INSTALL_LOG
  rm -f "$STATUS" "$ERRORS"
else
  mkdir -p "$OUT" || die "OUT: cannot create $OUT"; OUT=$(cd "$OUT" && pwd); LOG=$OUT/build.log
  rm -f "$OUT"/{summary.md,results.jsonl,summary.csv,report.html,env.json,check.log}
fi
: >"$LOG"
if [[ $INSTALL_ONLY == 0 && -s $INSTALL_LOG ]]; then
  { echo "== the earlier --install-only run's log"; cat "$INSTALL_LOG"; echo "== this run"; } >>"$LOG"
fi
say() { echo "== $*" | tee -a "$LOG"; }
# A failure before the measuring steps still leaves a summary.md that says what happened.
fail() {
  if [[ -n $OUT ]]; then
    { echo "# scalebench GPU check: stopped before measuring"; echo
      echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname): $*"; echo
      echo "The last lines of build.log:"; echo; echo '```'; tail -n 25 "$LOG"; echo '```'; } >"$OUT/summary.md"
  fi
  echo "gpu-check: $*" >&2; exit 1
}
# A long log into LOG whole, or its first and last 400 lines.
append_log() {
  local file=$1 lines
  [[ -f $file ]] || return 0
  lines=$(wc -l <"$file")
  echo "== $file ($lines lines)" >>"$LOG"
  if (( lines <= 1000 )); then cat "$file" >>"$LOG"
  else
    { head -n 400 "$file"; echo "... ($(( lines - 800 )) lines left out) ..."; tail -n 400 "$file"; } >>"$LOG"
  fi
}

# 1. the private environment: its own site-packages first, then the machine's (a .pth file runs
# site.addsitedir on each of the interpreter's site-packages folders), so the machine's torch is
# used and never replaced. The bundle's wheels all go into the private folder
# (--ignore-installed: the machine's copies are neither used for them nor touched).
say "offline install of $(ls "$BUNDLE"/wheels/*.whl | wc -l) wheels into $PRIV"
if [[ ! -x $PRIV/bin/python ]]; then
  "$PY" -m venv --without-pip "$PRIV" >>"$LOG" 2>&1 || fail "python3 -m venv failed (see build.log)"
fi
SITE=$("$PRIV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PY" - >"$SITE/_scalebench_host.pth" <<'PYEOF'
import os, site, sys
dirs = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
user = site.getusersitepackages()
dirs += [user] if isinstance(user, str) and os.path.isdir(user) and user not in dirs else []
print("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dict.fromkeys(dirs)))
PYEOF
PIPW=("$BUNDLE"/wheels/pip-*.whl)
if ! "$PRIV/bin/python" -m pip --version >/dev/null 2>&1 || [[ $("$PRIV/bin/python" -c 'import pip, os; print(os.path.dirname(pip.__file__))') != "$SITE"/* ]]; then
  "$PRIV/bin/python" "${PIPW[0]}/pip" install -q --no-index --find-links "$BUNDLE/wheels" pip >>"$LOG" 2>&1 \
    || fail "pip could not be installed from the bundle (see build.log)"
fi
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$BUNDLE/wheels PIP_DISABLE_PIP_VERSION_CHECK=1
EXTRA=()
[[ -d $BUNDLE/ray ]] && EXTRA=("$BUNDLE"/ray/*.whl)
# The measuring command after --install-only (or a second check) finds the same wheels already
# installed: the stamp names every wheel with its size, so a changed bundle installs again.
STAMP=$PRIV/.bundle-wheels
WANT_STAMP=$(for w in "$BUNDLE"/wheels/*.whl "${EXTRA[@]}"; do echo "$(basename "$w") $(stat -L -c %s "$w")"; done)
if [[ -f $STAMP && $(cat "$STAMP") == "$WANT_STAMP" ]]; then
  say "the bundle's wheels are already installed in $PRIV (the same names and sizes)"
else
  rm -f "$STAMP"
  "$PRIV/bin/python" -m pip install -q --no-deps --ignore-installed "$BUNDLE"/wheels/*.whl "${EXTRA[@]}" >>"$LOG" 2>&1 \
    || fail "the offline install failed (see build.log)"
  echo "$WANT_STAMP" >"$STAMP"
fi
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH}
"$PRIV/bin/python" - >>"$LOG" 2>&1 <<'PYEOF' || fail "scalebench does not import in the private environment (see build.log)"
import ruptures, scalebench, torch
print("scalebench", scalebench.__file__, "| ruptures", ruptures.__file__, "| torch",
      torch.__version__, torch.__file__)
PYEOF
tail -n 1 "$LOG"

# 2. Horovod, built with NCCL for this GPU (cached: a second check installs it in seconds).
SDIST=("$BUNDLE"/horovod-*.tar.gz)
earlier=$(cat "$STATUS" 2>/dev/null)
mode=()
if [[ $BOX -eq 0 ]]; then
  echo "not built: --horovod-box 0" >"$STATUS"
elif [[ ! -f ${SDIST[0]} ]]; then
  echo "not built: the bundle holds no Horovod source" >"$STATUS"
else
  # After a failed --install-only build, only a cached wheel is installed: the same build
  # would fail again and eat the measuring steps' time.
  [[ $INSTALL_ONLY == 0 && $earlier == skipped:* ]] && mode=(--cache-only)
  say "Horovod: ${mode:+cached wheel only (the --install-only build did not finish), }build or cached install, time box ${BOX} s, $(env -u OMP_NUM_THREADS nproc) cores"
  hstart=$(date +%s)
  hlog=$WORK/horovod-install.log
  SCALEBENCH_HOROVOD_SDIST=${SDIST[0]} timeout --kill-after=10 "$BOX" \
    bash "$HERE/scripts/install_horovod.sh" "$PRIV" "${mode[@]}" >"$hlog" 2>&1
  code=$?
  cat "$hlog" >>"$LOG"
  built_log=$(sed -n 's/^horovod: build log: //p' "$hlog" | tail -n 1)
  toolkit=$(sed -n 's/^horovod: CUDA toolkit: //p' "$hlog" | tail -n 1)
  if [[ $code -eq 0 ]]; then
    flags=$("$PRIV/bin/python" -c 'import horovod.torch as h; print(f"NCCL {bool(h.nccl_built())}, Gloo {bool(h.gloo_built())}, CUDA {bool(h.cuda_built())}")' 2>>"$LOG")
    how=built
    grep -q '^horovod: installed from cache' "$hlog" && how="installed from the cache"
    grep -q '^horovod: already installed' "$hlog" && how="already installed (by --install-only)"
    echo "$how in $(( $(date +%s) - hstart )) s: $flags${toolkit:+; CUDA toolkit $toolkit}" >"$STATUS"
    rm -f "$ERRORS"
  else
    if [[ $code -eq 124 || $code -eq 137 ]]; then
      echo "skipped: the build did not finish within its time box of ${BOX} s (log: build.log)" >"$STATUS"
    elif [[ ${mode[*]} == --cache-only ]]; then
      echo "skipped: no cached wheel, and the --install-only build before this run did not finish: ${earlier#skipped: }" >"$STATUS"
    else
      reason=$(grep -m1 '^horovod: error: ' "$hlog" | cut -c1-300)
      echo "skipped: the build failed (exit $code): ${reason:-see build.log} (log: build.log)" >"$STATUS"
    fi
    if [[ ${mode[*]} != --cache-only ]]; then
      { echo "The first errors (line numbers of the build log):"; echo
        sed -n '/^horovod: the first errors/,/^horovod: the last lines/p' "$hlog" | sed '1d;$d'
        echo; echo "The last lines:"; echo
        if [[ -n $built_log && -f $built_log ]]; then tail -n 25 "$built_log"; else tail -n 25 "$hlog"; fi
      } >"$ERRORS"
    fi
  fi
  [[ -n $built_log ]] && append_log "$built_log"
fi
say "Horovod: $(cat "$STATUS")"
if [[ $INSTALL_ONLY == 1 ]]; then
  echo "gpu-check: installed into $PRIV in $(( $(date +%s) - START )) s; Horovod: $(cat "$STATUS")"
  [[ $(cat "$STATUS") == skipped:* ]] && { cat "$ERRORS" 2>/dev/null; exit 3; }
  exit 0
fi

# 3. the measuring steps under what is left of the budget
"$PRIV/bin/python" "$HERE/scripts/gpu_check.py" --out "$OUT" --work "$WORK" --device "$DEVICE" \
  --deadline "$DEADLINE" --horovod-status "$STATUS" --horovod-errors "$ERRORS" --bundle "$BUNDLE"
code=$?
echo "gpu-check: done in $(( $(date +%s) - START )) s (budget $BUDGET s); read $OUT/summary.md"
exit $code
