#!/usr/bin/env bash
# Explains a directory of profiles on a Slurm cluster and ends in one report: submits an array of
# N shard tasks (scripts/slurm-explain.sh) and a merge step that runs after all of them succeed
# (scripts/slurm-merge.sh, --dependency=afterok). The merge writes OUT/report.{json,txt,html} and
# folds the tasks' node-local caches into SHARED_CACHE, which the next batch starts from.
#
#   scripts/slurm-batch.sh PROFILES OUT SHARED_CACHE [keet explain options...]
#
# Environment: KEET_SHARDS (N, default 16), KEET (the keet binary; default: `keet` on PATH),
# KEET_SBATCH_OPTS (extra sbatch options for both jobs, e.g. "--partition=cpu --account=me").
# Paths are made absolute, so the jobs and the merge find the profiles from any node.
# A folder created here for SHARED_CACHE is 0700 (keet writes the cache file itself 0600); an
# existing folder keeps its mode.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
in="$(realpath "${1:?profile directory}")"; out="${2:?output directory}"; cache="${3:?shared cache file}"; shift 3
mkdir -p "$out/logs"
(umask 077 && mkdir -p "$(dirname "$cache")")
out="$(realpath "$out")"; cache="$(realpath "$cache")"
n="${KEET_SHARDS:-16}"
read -r -a opts <<< "${KEET_SBATCH_OPTS:-}"
export KEET="${KEET:-keet}" KEET_SHARED_CACHE="$cache" KEET_SHARDS="$n"
array=$(sbatch --parsable --array="0-$((n - 1))" "${opts[@]}" -o "$out/logs/explain-%A_%a.out" \
  "$here/slurm-explain.sh" "$in" "$out" "$@")
array="${array%%;*}"
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes "${opts[@]}" \
  -o "$out/logs/merge-%j.out" "$here/slurm-merge.sh" "$out" "$cache" "$n")
merge="${merge%%;*}"
echo "array job $array ($n tasks) -> merge job $merge -> $out/report.json"
