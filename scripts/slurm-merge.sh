#!/usr/bin/env bash
# The merge step of a sharded keet batch (submitted by scripts/slurm-batch.sh with
# --dependency=afterok on the array): folds the tasks' caches into the shared cache, then merges
# OUT/part-0..N-1.json into OUT/report.{json,txt,html}, the report an unsharded run would give.
#
#   sbatch --dependency=afterok:ARRAY_JOB scripts/slurm-merge.sh OUT SHARED_CACHE N
#SBATCH --job-name=keet-merge
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --time=01:00:00
set -euo pipefail
out="${1:?output directory}"; shared_cache="${2:?shared cache file}"; n="${3:?number of shards}"
keet="${KEET:-keet}"
parts=()
for ((k = 0; k < n; k++)); do parts+=("$out/part-$k.json"); done
shopt -s nullglob
caches=("$out"/caches/cache-*.sqlite3)
if ((${#caches[@]})); then
  "$keet" cache merge "${caches[@]}" --into "$shared_cache"
fi
for fmt in json txt html; do
  f="$fmt"; [[ $fmt == txt ]] && f=text
  rc=0
  "$keet" merge "${parts[@]}" --cache "$shared_cache" --format "$f" -o "$out/report.$fmt" || rc=$?
  # Exit 2: some inputs were not profiles (listed in the report).
  [[ $rc == 0 || $rc == 2 ]] || exit "$rc"
done
echo "keet merge: $out/report.json, $out/report.txt, $out/report.html; cache $shared_cache"
