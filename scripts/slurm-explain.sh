#!/usr/bin/env bash
# One array task of a sharded keet batch (submitted by scripts/slurm-batch.sh, which also submits
# the merge step): task K of N explains every N-th profile (keet explain --shard K/N) into
# OUT/part-K.json with a node-local cache (SQLite over NFS is unsafe), started from the shared
# cache when there is one, and copies that cache back to OUT/caches/cache-K.sqlite3 (one
# transaction) for the merge step to fold into the shared cache.
# Caches hold kernel names and source lines: the node-local one lives in a folder of its own that
# only the user can enter (mktemp -d, 0700, removed at the end), OUT/caches is 0700, and keet
# writes every cache file 0600. The reports follow the user's umask.
#
#   sbatch --array=0-15 scripts/slurm-explain.sh PROFILES OUT [keet explain options...]
#
# Environment: KEET (the keet binary, default `keet`), KEET_SHARED_CACHE (cache to start from),
# KEET_SHARDS (N, default SLURM_ARRAY_TASK_COUNT).
#SBATCH --job-name=keet-explain
#SBATCH --cpus-per-task=4
#SBATCH --mem=4G
#SBATCH --time=02:00:00
set -euo pipefail
in="${1:?profile directory}"; out="${2:?output directory}"; shift 2
keet="${KEET:-keet}"
k="${SLURM_ARRAY_TASK_ID:-0}"; n="${KEET_SHARDS:-${SLURM_ARRAY_TASK_COUNT:-1}}"
cpus="${SLURM_CPUS_PER_TASK:-1}"
mkdir -p "$out"
(umask 077 && mkdir -p "$out/caches")
chmod 700 "$out/caches"
local_dir="$(mktemp -d "${TMPDIR:-/tmp}/keet-cache-${SLURM_ARRAY_JOB_ID:-$$}-$k.XXXXXX")"
trap 'rm -rf "$local_dir"' EXIT
local_cache="$local_dir/cache.sqlite3"
if [[ -n "${KEET_SHARED_CACHE:-}" && -f "$KEET_SHARED_CACHE" ]]; then
  "$keet" cache merge "$KEET_SHARED_CACHE" --into "$local_cache"
fi
export KEET_CACHE="$local_cache" KEET_THREADS="$cpus"
rc=0
"$keet" explain "$in" --shard "$k/$n" --jobs "$cpus" --top 20 --format json -o "$out/part-$k.json" "$@" || rc=$?
# Exit 2: some inputs are not profiles; they are listed in the part, which is complete.
if [[ -f "$local_cache" ]]; then
  "$keet" cache merge "$local_cache" --into "$out/caches/cache-$k.sqlite3"
fi
[[ $rc == 0 || $rc == 2 ]] || exit "$rc"
echo "keet shard $k/$n: $out/part-$k.json"
