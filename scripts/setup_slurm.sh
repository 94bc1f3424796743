#!/usr/bin/env bash
# Slurm and munge for the Slurm tests (tests/test_slurm.py starts and stops its own private
# cluster with scripts/slurm_local.sh): installs Debian's slurm-wlm and munge packages when
# the commands are missing. Idempotent. Without apt-get or root (or passwordless sudo) it says
# so and exits 0: the Slurm tests then skip with the reason.
set -euo pipefail

missing=()
for tool in munged slurmctld slurmd srun salloc sbatch scontrol; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0

skip() { echo "setup_slurm: $1; the Slurm tests will be skipped" >&2; exit 0; }
command -v apt-get >/dev/null || skip "no apt-get to install ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || skip "not root and no passwordless sudo to install ${missing[*]}"
    sudo=(sudo -n)
fi
echo "setup_slurm: installing slurm-wlm and munge (missing: ${missing[*]})"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq slurm-wlm munge >/dev/null
