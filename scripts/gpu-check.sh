#!/usr/bin/env bash
# GPU check of a CUDA keet build on the lent H100/H200 machine (docs/cuda.md, "The GPU check"), run
# from the repository root after the pieces made by scripts/gpu-pack.sh were carried into .device/:
#
#   bash scripts/gpu-check.sh                 # on the device (or bash .device/gpu-check.sh)
#   bash scripts/gpu-check.sh --device cpu --bin target/release/keet --model M.gguf --profile P.ncu-rep
#                                             # the same steps on a CPU build, to prove the script
#
# Steps, each timed and under `timeout`; a failure is recorded and the script goes on:
#  1. join and unpack the binary (.device/keet.xz.part-* or .device/keet.xz) and the model
#     (.device/model.gguf.part-*), check their sha256 against .device/SHA256SUMS;
#  2. (cuda) LD_LIBRARY_PATH from /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib (never a
#     stubs folder), `ldd` must find every library; nvidia-smi;
#  3. device + cuBLAS matmul: `keet bench llm --synthetic tiny` (bf16 on cuda: candle's matmul is a
#     cuBLAS GEMM); keet has no dedicated device self-check command;
#  4. `keet bench llm --synthetic S` for S in qwen2.5-7b-q4, llama3-8b-q4: prompt and decode tok/s,
#     copy bandwidth, decode % of the bandwidth limit (keet's own, from the measured copy
#     bandwidth) and % of the card's nominal HBM bandwidth;
#  5. `keet generate` on the model (greedy);
#  6. `keet explain -f json --no-cache` of a corpus profile on the device and, with the same binary,
#     on the CPU; the findings are compared (greedy decoding; re-asks are seeded);
#  7. ncu: only its version is recorded (nothing is profiled).
# Everything goes to "$OUT/gpu-check.txt" (OUT defaults to ./gpu-check-out), the explain reports to
# $OUT/explain-<device>.json. The whole run keeps inside --budget seconds (default 450): each step's
# timeout is cut to what is left.
set -u
DEVICE=cuda
BIN=
MODEL=
PROFILE=
SHAPES="qwen2.5-7b-q4,llama3-8b-q4"
PROMPT_TOKENS=512
TOKENS=128
THREADS=
BUDGET=450
DIR=.device
usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; cat <<'EOF'
Options: --device cuda|cuda:N|cpu  --bin PATH  --model PATH  --profile PATH  --dir DIR (.device)
         --shapes LIST (qwen2.5-7b-q4,llama3-8b-q4)  --prompt-tokens N (512)  --tokens N (128)
         --threads N (keet's CPU threads)  --budget SECONDS (450)
EOF
}
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --shapes) SHAPES=$2; shift 2 ;;
    --prompt-tokens) PROMPT_TOKENS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-./gpu-check-out}
mkdir -p "$OUT"
REPORT="$OUT/gpu-check.txt"
: > "$REPORT"
START=$(date +%s)
FAILS=()
PY=$(command -v python3 || true)
TH=()
[ -n "$THREADS" ] && TH=(--threads "$THREADS")

log() { printf '%s\n' "$*" | tee -a "$REPORT"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
# step NAME SECONDS CMD...: runs CMD under timeout (cut to the budget left), output into the report.
step() {
  local name=$1 limit=$2; shift 2
  local l; l=$(left)
  [ "$limit" -gt $((l - 5)) ] && limit=$((l - 5))
  log ""
  log "=== $name (limit ${limit}s, $(( $(date +%s) - START ))s into the run)"
  log "\$ $(printf '%q ' "$@")"
  if [ "$limit" -lt 5 ]; then
    log "--- $name: SKIPPED (budget of ${BUDGET}s spent)"
    FAILS+=("$name: skipped, no time left")
    return 124
  fi
  local t0 rc tmp; t0=$(date +%s.%N); tmp=$(mktemp)
  timeout -k 10 "$limit" bash -c '"$@"' _ "$@" > "$tmp" 2>&1
  rc=$?
  local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  if [ "$(wc -l < "$tmp")" -gt 300 ]; then
    head -n 100 "$tmp" >> "$REPORT"; echo "... ($(wc -l < "$tmp") lines, middle cut) ..." >> "$REPORT"
    tail -n 150 "$tmp" >> "$REPORT"
  else
    cat "$tmp" >> "$REPORT"
  fi
  LAST_OUT=$(cat "$tmp"); rm -f "$tmp"
  local what=ok
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="TIMED OUT"
  [ $rc -ne 0 ] && [ "$what" = ok ] && what=FAILED
  log "--- $name: $what (rc $rc, ${dt}s)"
  [ $rc -ne 0 ] && FAILS+=("$name: $what (rc $rc)")
  return $rc
}
# Expected sha256 of a file named in $DIR/SHA256SUMS (by its base name).
expected() { [ -f "$DIR/SHA256SUMS" ] && awk -v f="$1" '{n=$2; sub(/^\*/,"",n); sub(/.*\//,"",n); if (n==f) print $1}' "$DIR/SHA256SUMS" | head -n1; }
verify() { # verify FILE: sha256 against SHA256SUMS (ok when unlisted is reported, not failed)
  local f=$1 want got; want=$(expected "$(basename "$f")"); got=$(sha256sum "$f" | cut -d' ' -f1)
  echo "sha256 $got  $f ($(stat -c %s "$f") bytes)"
  if [ -z "$want" ]; then echo "not listed in $DIR/SHA256SUMS: not checked"; return 0; fi
  [ "$got" = "$want" ] && echo "matches SHA256SUMS" && return 0
  echo "MISMATCH: SHA256SUMS says $want"; return 1
}
unxz_to() { # unxz_to SRC.xz DEST: xz if there, else python3's lzma
  if command -v xz > /dev/null; then xz -dc "$1" > "$2.tmp"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"), 1<<20)' "$1" "$2.tmp"; fi \
    && mv "$2.tmp" "$2"
}
assemble_bin() {
  local d=$DIR
  if ls "$d"/keet.xz.part-* > /dev/null 2>&1; then cat "$d"/keet.xz.part-* > "$d/keet.xz" || return 1; fi
  if [ -f "$d/keet.xz" ]; then
    verify "$d/keet.xz" || return 1
    if [ -x "$d/keet" ] && [ "$(sha256sum < "$d/keet" | cut -d' ' -f1)" = "$(expected keet)" ]; then echo "$d/keet already unpacked"
    else unxz_to "$d/keet.xz" "$d/keet" || return 1; fi
  elif ls "$d"/keet.part-* > /dev/null 2>&1; then cat "$d"/keet.part-* > "$d/keet" || return 1
  fi
  [ -f "$d/keet" ] || { echo "no binary: neither $d/keet.xz(.part-*) nor $d/keet"; return 1; }
  chmod +x "$d/keet"; verify "$d/keet"
}
assemble_model() {
  local d=$DIR
  if ls "$d"/model.gguf.part-* > /dev/null 2>&1; then
    if [ -f "$d/model.gguf" ] && [ "$(sha256sum < "$d/model.gguf" | cut -d' ' -f1)" = "$(expected model.gguf)" ]; then echo "$d/model.gguf already joined"
    else cat "$d"/model.gguf.part-* > "$d/model.gguf.tmp" && mv "$d/model.gguf.tmp" "$d/model.gguf" || return 1; fi
  fi
  [ -f "$d/model.gguf" ] || { echo "no model: no $d/model.gguf.part-*"; return 1; }
  verify "$d/model.gguf"
}
export DIR
export -f expected verify unxz_to assemble_bin assemble_model

log "keet GPU check: device $DEVICE, $(date -u +%FT%TZ), host $(hostname), $(nproc) cores, budget ${BUDGET}s"
log "repo: $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git status --porcelain 2>/dev/null | wc -l) changed paths; $(uname -srm); $(ldd --version 2>&1 | head -n1)"
log "memory: $(free -g 2>/dev/null | awk '/Mem:/{print $2" GiB total, "$7" GiB available"}'); python3: ${PY:-none}; xz: $(command -v xz || echo none)"
[ -f "$DIR/SHA256SUMS" ] && { log "SHA256SUMS:"; cat "$DIR/SHA256SUMS" >> "$REPORT"; }

# 1. Binary and model.
if [ -z "$BIN" ]; then step "join and unpack the binary" 90 assemble_bin; BIN=$DIR/keet
else step "binary given (--bin), not unpacked" 20 bash -c 'sha256sum "$1"; ls -l "$1"' _ "$BIN"; fi
if [ -z "$MODEL" ]; then step "join the model" 60 assemble_model; MODEL=$DIR/model.gguf
else step "model given (--model)" 30 verify "$MODEL"; fi
if [ -z "$PROFILE" ]; then PROFILE=$(ls "$DIR"/*.ncu-rep "$DIR"/*.csv 2>/dev/null | head -n1); fi
[ -n "$PROFILE" ] && [ -f "$PROFILE" ] && step "corpus profile" 20 verify "$PROFILE"

# 2. Libraries and GPU.
if [ "$DEVICE" != cpu ]; then
  LIBS=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | grep -v stubs | paste -sd: -)
  export LD_LIBRARY_PATH=${LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log ""; log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [ -z "$LIBS" ] && { log "no /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib found"; FAILS+=("CUDA libraries: none found"); }
fi
step "ldd (every library found?)" 20 bash -c 'ldd "$1"; ! ldd "$1" | grep -q "not found"' _ "$BIN"
if command -v objdump > /dev/null; then
  step "newest glibc symbol needed" 20 bash -c 'objdump -T "$1" | grep -o "GLIBC_[0-9.]*" | sort -uV | tail -n1' _ "$BIN"
else log ""; log "objdump not on PATH: glibc need not listed"; fi
GPU_NAME=
if command -v nvidia-smi > /dev/null; then
  step "nvidia-smi" 30 nvidia-smi
  GPU_NAME=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n1)
  log "GPU: $GPU_NAME"
elif [ "$DEVICE" != cpu ]; then log ""; log "nvidia-smi not on PATH"; FAILS+=("nvidia-smi: not on PATH"); fi
step "keet --version" 20 "$BIN" --version

# 3-4. Benchmarks. bench_summary JSON: one line per run.
NOMINAL=0  # GB/s of the card's HBM, from its name (for the "% of nominal HBM" column)
case "$GPU_NAME" in
  *H200*) NOMINAL=4800 ;; *H100*PCIe*) NOMINAL=2000 ;; *H100*NVL*) NOMINAL=3900 ;; *H100*) NOMINAL=3350 ;;
esac
SUMMARY=()
bench() { # bench NAME PROMPT TOKENS COPY
  local s=$1
  step "bench llm --synthetic $s on $DEVICE" "${5:-150}" "$BIN" bench llm --device "$DEVICE" "${TH[@]}" --synthetic "$s" \
    --prompt-tokens "$2" --tokens "$3" --copy-bytes "$4" --json
  local rc=$?
  if [ -n "$PY" ] && [ $rc -eq 0 ]; then
    SUMMARY+=("$(printf '%s' "$LAST_OUT" | NOMINAL=$NOMINAL python3 -c '
import json, os, sys
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
k = json.loads(lines[-1])["keet"]
nom = float(os.environ["NOMINAL"]); wb = k.get("weight_bytes_per_token") or 0
eff = wb * k["decode_tok_s"] / 1e9
pct = "%5.1f%%" % (100 * eff / nom) if nom and wb else "    -"
print("%-16s %-8s prompt %8.1f tok/s  decode %7.1f tok/s  weights %6.3f GB/token  copy %7.1f GB/s  limit %7.1f tok/s  decode %5.1f%% of limit  %5.0f GB/s read = %s of nominal HBM  load %.1fs  finite %s" % (
  k["synthetic"]["name"], k["synthetic"]["dtype_on_device"], k["prompt_tok_s"], k["decode_tok_s"], wb / 1e9,
  k["copy_bandwidth_gbps"], k["decode_limit_tok_s"] or 0, k["decode_pct_of_limit"] or 0, eff, pct, k["load_s"], k["logits_finite"]))
' 2>&1)")
  fi
}
bench tiny 64 8 256MiB 60
IFS=, read -r -a SHAPE_LIST <<< "$SHAPES"
for s in "${SHAPE_LIST[@]}"; do bench "$s" "$PROMPT_TOKENS" "$TOKENS" 1GiB 150; done

# 5. The model on the device.
step "generate on $DEVICE" 60 "$BIN" generate --device "$DEVICE" "${TH[@]}" --model "$MODEL" -p "Say hello in five words." \
  --max-tokens 32 --stats

# 6. explain on the device, then on the CPU with the same binary; compare the findings.
EXPLAINED=()
if [ -n "$PROFILE" ] && [ -f "$PROFILE" ]; then
  DEVS=("$DEVICE"); [ "$DEVICE" = cpu ] && DEVS=(cpu cpu-again) || DEVS+=(cpu)
  for d in "${DEVS[@]}"; do
    dev=${d%-again}
    step "explain on $d" 120 "$BIN" explain --device "$dev" "${TH[@]}" --model "$MODEL" --no-cache -f json --stats \
      -o "$OUT/explain-$d.json" "$PROFILE" && EXPLAINED+=("$OUT/explain-$d.json")
  done
  if [ ${#EXPLAINED[@]} -eq 2 ] && [ -n "$PY" ]; then
    step "compare findings (${DEVS[0]} vs ${DEVS[1]})" 30 python3 - "${EXPLAINED[@]}" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("A:", sys.argv[1], (a.get("model") or {}).get("device"), " B:", sys.argv[2], (b.get("model") or {}).get("device"))
def fields(r):
    out = {}
    for k in r.get("kernels", []):
        name = json.dumps(k.get("kernel"), sort_keys=True)[:200]
        out[k["rank"]] = (k.get("kernel"), k.get("verdict"), [
            (f.get("category"), f.get("severity"), f.get("origin"), f.get("claim"), f.get("explanation"), f.get("suggestions"))
            for f in k.get("findings", [])], len(k.get("dropped", [])))
    return out
fa, fb = fields(a), fields(b)
same_text = same_cat = total = 0
for r in sorted(set(fa) | set(fb)):
    ka, kb = fa.get(r), fb.get(r)
    if not ka or not kb:
        print(f"rank {r}: only in {'A' if ka else 'B'}"); continue
    if ka[0] != kb[0]: print(f"rank {r}: DIFFERENT kernels")
    cats_a = [(f[0], f[1]) for f in ka[2]]; cats_b = [(f[0], f[1]) for f in kb[2]]
    print(f"rank {r}: {len(ka[2])} vs {len(kb[2])} findings; categories {'same' if cats_a == cats_b else 'DIFFER'}: {cats_a} / {cats_b}; dropped {ka[3]} vs {kb[3]}")
    print(f"  verdict A: {ka[1]}\n  verdict B: {kb[1]}")
    for i in range(max(len(ka[2]), len(kb[2]))):
        total += 1
        x = ka[2][i] if i < len(ka[2]) else None; y = kb[2][i] if i < len(kb[2]) else None
        if x and y and x[0] == y[0]: same_cat += 1
        if x == y: same_text += 1; print(f"  finding {i + 1}: identical ({x[2]})")
        else:
            for lab, v in (("A", x), ("B", y)):
                print(f"  finding {i + 1} {lab}: " + (f"[{v[0]}/{v[1]}/{v[2]}] {v[3]} | {v[4]} | {v[5]}" if v else "(none)"))
sa, sb = (a.get("summary") or {}).get("text"), (b.get("summary") or {}).get("text")
print(f"summary: {'identical' if sa == sb else 'differs'}")
if sa != sb: print(f"  A: {sa}\n  B: {sb}")
print(f"RESULT: {len(fa)} vs {len(fb)} kernels; findings {total}: same category {same_cat}, identical text {same_text}")
PYEOF
  fi
else
  log ""; log "no corpus profile (.device/*.ncu-rep or --profile): explain skipped"; FAILS+=("explain: no profile")
fi

# 7. ncu: recorded, nothing profiled.
if command -v ncu > /dev/null; then step "ncu --version (nothing profiled)" 30 ncu --version
else log ""; log "ncu not on PATH: skipped"; fi

log ""
log "=== summary ($(( $(date +%s) - START ))s in all, device $DEVICE${GPU_NAME:+, $GPU_NAME})"
for l in "${SUMMARY[@]}"; do log "$l"; done
if [ ${#FAILS[@]} -eq 0 ]; then log "all steps ok"; else log "${#FAILS[@]} step(s) not ok:"; for f in "${FAILS[@]}"; do log "  $f"; done; fi
log "report: $REPORT"
exit 0
