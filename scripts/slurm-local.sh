#!/usr/bin/env bash
# A single-node Slurm on this machine, for trying the batch scripts and for tests/integration/slurm_batch.rs:
# Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge), one node (this host), all
# state under DIR. Needs root (munged and slurmd run as root here).
#
#   scripts/slurm-local.sh start DIR   # writes DIR/slurm.conf, starts munged, slurmctld, slurmd
#   export SLURM_CONF=DIR/slurm.conf   # then sbatch, squeue, sinfo use it
#   scripts/slurm-local.sh stop DIR    # stops the daemons it started
#
# Exit codes: 0 started and the node is idle; 3 cannot start (missing packages, not root, a
# daemon did not come up: the reason is printed); 1 other errors.
set -euo pipefail
cmd="${1:?start|stop}"; dir="${2:?state directory}"
mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
conf="$dir/slurm.conf"

stop() {
  for d in slurmd slurmctld munged; do
    if [[ -f "$dir/$d.pid" ]]; then
      pid="$(cat "$dir/$d.pid")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/$d.pid"
    fi
  done
}

cannot() { echo "cannot start Slurm: $*" >&2; [[ "${cmd:-}" == start && -n "${dir:-}" ]] && stop; exit 3; }

if [[ "$cmd" == stop ]]; then stop; exit 0; fi
[[ "$cmd" == start ]] || { echo "usage: $0 start|stop DIR" >&2; exit 1; }

for b in munged slurmctld slurmd sbatch sinfo; do
  command -v "$b" >/dev/null 2>&1 || [[ -x "/usr/sbin/$b" ]] || cannot "$b not installed (apt-get install -y slurm-wlm munge)"
done
[[ "$(id -u)" == 0 ]] || cannot "needs root (munged and slurmd)"
export PATH="$PATH:/usr/sbin"
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"

# munge: a key (Debian's package makes one), then munged with its socket under DIR.
key=/etc/munge/munge.key
[[ -s "$key" ]] || cannot "no munge key at $key (mungekey -c)"
sock="$dir/munge/munge.socket.2"
munged --key-file="$key" --socket="$sock" --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed" -f 2>"$dir/log/munged.err" || cannot "munged: $(tail -1 "$dir/log/munged.err")"

cat > "$conf" <<CONF
ClusterName=keetlocal
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${KEET_SLURMCTLD_PORT:-6817}
SlurmdPort=${KEET_SLURMD_PORT:-6818}
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=batch Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf"
slurmctld -f "$conf" 2>"$dir/log/slurmctld.err" || cannot "slurmctld: $(cat "$dir/log/slurmctld.err" 2>/dev/null | tail -n 3 | tr '\n' ' ')"
slurmd -f "$conf" 2>"$dir/log/slurmd.err" || cannot "slurmd: $(cat "$dir/log/slurmd.err" 2>/dev/null | tail -n 3 | tr '\n' ' ')"
for _ in $(seq 100); do
  state="$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)"
  if [[ "$state" == idle* ]]; then echo "Slurm up: node $host ($cpus CPUs), SLURM_CONF=$conf"; exit 0; fi
  sleep 0.2
done
stop
cannot "the node did not become idle (state: ${state:-none}); see $dir/log"
