#!/usr/bin/env bash
# Explain thousands of profiles on many nodes as a Slurm job array: each array task takes every
# N-th file (keet explain --shard K/N), writes its own JSON report, and uses a node-local cache
# (SQLite over NFS is unsafe; copy caches back if you want to keep them).
#
#   sbatch --array=0-15 scripts/slurm-explain.sh /scratch/profiles /scratch/keet-out
#
#SBATCH --job-name=keet-explain
#SBATCH --cpus-per-task=4
#SBATCH --mem=4G
#SBATCH --time=02:00:00
set -euo pipefail
in="${1:?profile directory}"; out="${2:?output directory}"
k="${SLURM_ARRAY_TASK_ID:-0}"; n="${SLURM_ARRAY_TASK_COUNT:-1}"
mkdir -p "$out"
export KEET_CACHE="${TMPDIR:-/tmp}/keet-cache-$SLURM_JOB_ID-$k.sqlite3"
export KEET_THREADS="${SLURM_CPUS_PER_TASK:-1}"
keet explain "$in" --shard "$k/$n" --jobs "${SLURM_CPUS_PER_TASK:-1}" --top 20 \
  --format json -o "$out/part-$k.json"
