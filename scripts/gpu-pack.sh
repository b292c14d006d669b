#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on the GPU machine into the ignored .device/ of a checkout
# (docs/cuda.md, "The GPU check"): the stripped CUDA binary as keet.xz (xz -9; split into 40M parts
# when over 40 MiB), the SmolLM2 model in 40M parts, one small corpus profile, gpu-check.sh itself
# (so that a checkout without it can run `bash .device/gpu-check.sh`) and SHA256SUMS of the whole
# files. Then prints how the pieces fit into device calls of at most 64 MiB (working tree included).
#   scripts/gpu-pack.sh CUDA_BINARY [DEST_CHECKOUT]   (DEST_CHECKOUT defaults to this repository)
# Environment: MODEL (default: the installed SmolLM2-135M-Instruct.Q4_1.gguf), PROFILE (default:
# ../shared/corpus/rtx4090-lashi/simpleAOS.ncu-rep).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:?usage: gpu-pack.sh CUDA_BINARY [DEST_CHECKOUT]}
DEST=$(cd "${2:-$here}" && pwd)
DATA=${KEET_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/keet}
MODEL=${MODEL:-$DATA/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROFILE=${PROFILE:-$here/../shared/corpus/rtx4090-lashi/simpleAOS.ncu-rep}
D=$DEST/.device
git -C "$DEST" check-ignore -q "$D/x" || { echo "$D is not ignored by git in $DEST: add /.device/ to .gitignore" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "no model at $MODEL: scripts/install-model.sh smollm2-135m-instruct" >&2; exit 1; }
mkdir -p "$D"
rm -f "$D"/keet "$D"/keet.xz "$D"/keet.xz.part-* "$D"/keet.part-* "$D"/model.gguf.part-* "$D"/*.ncu-rep "$D"/SHA256SUMS

strip -o "$D/keet" "$BIN"
nice -n 19 xz -9 -T1 -k -f "$D/keet"
if [ "$(stat -c %s "$D/keet.xz")" -gt $((40 << 20)) ]; then split -b 40M "$D/keet.xz" "$D/keet.xz.part-"; fi
split -b 40M "$MODEL" "$D/model.gguf.part-"
cp "$PROFILE" "$D/"
cp "$here/scripts/gpu-check.sh" "$D/gpu-check.sh"
P=$(basename "$PROFILE")
( cd "$D" && sha256sum keet keet.xz "$P" > SHA256SUMS && sha256sum < "$MODEL" | sed 's/-$/model.gguf/' >> SHA256SUMS )
rm -f "$D/keet"  # only the .xz (or its parts) travels; the device unpacks it
cat "$D/SHA256SUMS"
ls -l "$D"

# The calls: first-fit of the pieces (largest first) into 64 MiB less the working tree.
tree=$(git -C "$DEST" ls-files -z --cached --others --exclude-standard | (cd "$DEST" && xargs -0 stat -c %s 2>/dev/null) | awk '{s+=$1} END{print s+0}')
[ -d "$DEST/shared" ] && tree=$((tree + $(du -sb "$DEST/shared" | cut -f1)))
room=$(( (64 << 20) - tree - (1 << 20) ))  # 1 MiB spare
echo "working tree that travels: $tree bytes; room per call: $room bytes"
pieces=$( (cd "$DEST" && if ls .device/keet.xz.part-* > /dev/null 2>&1; then ls .device/keet.xz.part-*; else echo .device/keet.xz; fi
  ls .device/model.gguf.part-* .device/"$P" .device/SHA256SUMS .device/gpu-check.sh) | while read -r f; do echo "$(stat -c %s "$DEST/$f") $f"; done | sort -rn)
echo "$pieces" | awk -v room="$room" '
  { size[NR] = $1; name[NR] = $2 }
  END {
    n = 0
    for (i = 1; i <= NR; i++) {
      placed = 0
      for (c = 1; c <= n; c++) if (used[c] + size[i] <= room) { used[c] += size[i]; list[c] = list[c] ", \"" name[i] "\""; placed = 1; break }
      if (!placed) { n++; used[n] = size[i]; list[n] = "\"" name[i] "\"" }
    }
    for (c = 1; c <= n; c++) printf "call %d: carry [%s]  (%.1f MiB)\n", c, list[c], used[c] / 1048576
  }'
