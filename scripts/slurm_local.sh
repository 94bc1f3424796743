#!/usr/bin/env bash
# A throwaway Slurm cluster on this machine, for tests and trying the Slurm launcher:
#
#   scripts/slurm_local.sh start DIR [NODES] [LEAVES]
#                                              # munged, slurmctld and NODES slurmd (default 1);
#                                              # LEAVES > 0: a tree topology of that many leaf
#                                              # switches (DIR/topology.conf, TopologyPlugin=
#                                              # topology/tree), the nodes split evenly in order
#   export SLURM_CONF=DIR/slurm.conf           # then salloc / sbatch / srun use it
#   scripts/slurm_local.sh stop DIR            # stops exactly the daemons started in DIR
#
# Everything lives in DIR (created, must not exist or be empty): its own munge key and socket,
# slurm.conf with free ports, state, spool, logs and pid files; nothing under /etc is touched.
# The nodes are sb1..sbN on this machine (several slurmd, each with its own port), sharing its
# cores: one node gets them all; with several, each gets cores/N (at least 1) and tasks are
# not bound to cores (every slurmd would bind its first task to the same core).
# Needs Slurm and munge (scripts/setup_slurm.sh installs them) and, for slurmd, root.
set -euo pipefail

usage() { echo "usage: $0 start DIR [NODES] [LEAVES] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$2

stop() {
    local pidfile pid i
    if [ -f "$dir/run/slurmctld.pid" ] && command -v scancel >/dev/null; then
        # End what still runs on this private cluster: slurmstepd outlives a stopped slurmd.
        SLURM_CONF="$dir/slurm.conf" scancel -u "$(id -un)" 2>/dev/null || true
        for i in $(seq 50); do
            [ -z "$(SLURM_CONF="$dir/slurm.conf" squeue -h 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    for pidfile in "$dir"/run/slurmd-*.pid "$dir"/run/slurmctld.pid "$dir"/run/munged.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || continue
        for i in $(seq 50); do running "$pid" || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

running() {  # alive and not a zombie (an init that reaps late leaves those behind)
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ "${state:0:1}" != Z ]
}

free_port() {
    "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

case "$action" in
stop)
    stop
    exit 0
    ;;
start)
    nodes=${3:-1}
    leaves=${4:-0}
    [[ "$nodes" =~ ^[1-9][0-9]*$ ]] || { echo "$0: NODES: expected an integer >= 1, got $nodes" >&2; exit 2; }
    [[ "$leaves" =~ ^[0-9]+$ ]] && [ "$leaves" -le "$nodes" ] ||
        { echo "$0: LEAVES: expected an integer from 0 to NODES ($nodes), got $leaves" >&2; exit 2; }
    ;;
*)
    usage
    ;;
esac

for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "$0: $tool not found (scripts/setup_slurm.sh installs Slurm)" >&2; exit 3; }
done
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
    echo "$0: $dir is not empty" >&2
    exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir"/{munge,state,spool,log,run}
# munged wants its socket's folders executable by everyone and its key private.
chmod 755 "$dir" "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    { echo "$0: munged did not start: $(tail -n 1 "$dir/log/munged.log")" >&2; exit 4; }

host=$(hostname -s)
user=$(id -un)
# nproc obeys OMP_NUM_THREADS (a caller's thread setting), which says nothing about the cores
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [ "$nodes" -eq 1 ]; then
    cpus=$cores
    task_plugin=task/affinity
else
    cpus=$((cores / nodes))
    [ "$cpus" -ge 1 ] || cpus=1
    task_plugin=task/none
fi
touch "$dir/plugstack.conf"
cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm_local.sh: a ${nodes}-node test cluster on ${host}.
ClusterName=scalebench
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=${user}
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool/%n
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmdPidFile=${dir}/run/slurmd-%n.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd-%n.log
PlugStackConfig=${dir}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=${task_plugin}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
ReturnToService=2
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
EOF
for i in $(seq "$nodes"); do
    echo "NodeName=sb$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$cpus RealMemory=1000 State=UNKNOWN" >>"$dir/slurm.conf"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
if [ "$leaves" -gt 0 ]; then
    # leaf j holds nodes [j*N/L+1 .. (j+1)*N/L], a top switch joins the leaves
    echo "TopologyPlugin=topology/tree" >>"$dir/slurm.conf"
    echo "# Written by scripts/slurm_local.sh: ${leaves} leaf switches under one top switch." >"$dir/topology.conf"
    for j in $(seq 0 $((leaves - 1))); do
        first=$((j * nodes / leaves + 1))
        last=$(((j + 1) * nodes / leaves))
        echo "SwitchName=leaf$((j + 1)) Nodes=sb[${first}-${last}]" >>"$dir/topology.conf"
    done
    echo "SwitchName=top Switches=leaf[1-${leaves}]" >>"$dir/topology.conf"
fi

export SLURM_CONF="$dir/slurm.conf"
fail() {
    echo "$0: $1" >&2
    tail -n 3 "$dir"/log/slurm*.log >&2 || true
    stop
    exit 4
}
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
for i in $(seq "$nodes"); do
    slurmd -f "$SLURM_CONF" -N "sb$i" || fail "slurmd sb$i did not start"
done
for _ in $(seq 120); do
    states=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
    if [ "$states" = "idle " ]; then
        echo "$dir/slurm.conf"
        exit 0
    fi
    sleep 0.5
done
fail "nodes not idle after 60 s (states: ${states:-none})"
