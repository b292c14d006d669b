#!/usr/bin/env bash
# Scores PerfDigest-MCP's digests beside keet's context in `keet eval`.
#
#   scripts/perfdigest-contexts.sh QUESTIONS.jsonl OUT.jsonl [VENV]
#
# Installs perfdigest-mcp (with NVIDIA's ncu-report reader) from PyPI into VENV (default
# .venv-perfdigest), then writes one PerfDigest context per question of QUESTIONS.jsonl
# (`keet eval PATHS --no-llm --questions-out QUESTIONS.jsonl`). Score it with the same PATHS,
# --top and --seeds: `keet eval PATHS --context perfdigest=OUT.jsonl`.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0"; exit 2; }
venv=${3:-.venv-perfdigest}
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "perfdigest-mcp[nvidia]==1.3.0"
"$venv/bin/python" "$here/perfdigest_contexts.py" "$1" "$2"
