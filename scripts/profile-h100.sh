#!/usr/bin/env bash
# Builds the labelled fixture kernels (fixtures/kernels/*.cu) for sm_90 and profiles each kernel on
# an H100 with Nsight Compute, writing per kernel into the output folder (default fixtures/h100):
#   <kernel>.ncu-rep               ncu --set full --import-source yes, one launch
#   <kernel>.details.csv           ncu --import ... --csv --page details
#   <kernel>.raw.csv               ncu --import ... --csv --page raw
#   <kernel>.source-sass.csv       ncu --import ... --csv --page source --print-source sass
#   <kernel>.source-cuda-sass.csv  ncu --import ... --csv --page source --print-source cuda,sass
# plus PROVENANCE.txt (tool versions, GPU, command lines). The kernel list comes from
# fixtures/h100/labels.toml; see fixtures/h100/README.md for the whole procedure.
#
# Usage: scripts/profile-h100.sh [options] [PROGRAM|KERNEL ...]     (default: every labelled kernel)
#   --build-only      compile only (no GPU needed; nvcc is enough)
#   --profile-only    do not compile; use the binaries already in the build folder
#   --out DIR         output folder (default: fixtures/h100)
#   --build-dir DIR   where the binaries go (default: target/h100-kernels)
#   --force           profile kernels whose .ncu-rep already exists in the output folder
#   --list            print "program kernel" for the selection and exit
# Environment: NVCC=/path/to/nvcc, NCU=/path/to/ncu (else searched: CUDA_HOME, PATH, /usr/local/cuda*,
# /opt/nvidia/nsight-compute*, the PyPI-wheel toolkit of /work/shared/cuda/toolkit.sh),
# NCU_TIMEOUT=seconds per ncu run (default 300), NVCC_FLAGS=extra nvcc flags,
# NCU_EXTRA_METRICS=a,b,c (collected on top of --set full, e.g. when a label needs a metric the set
# lacks; an unknown name makes ncu fail, so check it with `ncu --query-metrics` first).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
labels="$repo/fixtures/h100/labels.toml"
src_dir="$repo/fixtures/kernels"
out="$repo/fixtures/h100"
build_dir="$repo/target/h100-kernels"
mode=all
force=0
list=0
selection=()

while (($#)); do
    case "$1" in
        --build-only) mode=build ;;
        --profile-only) mode=profile ;;
        --out) out=$2; shift ;;
        --out=*) out=${1#--out=} ;;
        --build-dir) build_dir=$2; shift ;;
        --build-dir=*) build_dir=${1#--build-dir=} ;;
        --force) force=1 ;;
        --list) list=1 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "profile-h100.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) selection+=("$1") ;;
    esac
    shift
done

die() { echo "profile-h100.sh: $*" >&2; exit 1; }
log() { echo "== $*"; }

# ---- the labelled kernels: "program kernel" lines, in labels.toml order -------------------------
[[ -f $labels ]] || die "$labels not found"
all_pairs=$(awk '
    /^\[\[kernel\]\]/ { if (name != "") print prog, name; name = ""; prog = "" }
    /^name[ \t]*=/    { split($0, a, "\""); name = a[2] }
    /^program[ \t]*=/ { split($0, a, "\""); prog = a[2] }
    END               { if (name != "") print prog, name }' "$labels")
[[ -n $all_pairs ]] || die "no [[kernel]] entries in $labels"

pairs=()
while read -r prog kern; do
    if ((${#selection[@]} == 0)); then
        pairs+=("$prog $kern")
    else
        for s in "${selection[@]}"; do
            if [[ $s == "$prog" || $s == "$kern" ]]; then pairs+=("$prog $kern"); break; fi
        done
    fi
done <<<"$all_pairs"
if ((${#selection[@]})); then
    for s in "${selection[@]}"; do
        grep -qE "(^| )$s( |\$)" <<<"$all_pairs" || die "'$s' is neither a labelled program nor a kernel (see --list)"
    done
fi
((${#pairs[@]})) || die "nothing selected"
if ((list)); then printf '%s\n' "${pairs[@]}"; exit 0; fi
programs=$(printf '%s\n' "${pairs[@]}" | awk '{print $1}' | awk '!seen[$0]++')

# ---- tools ------------------------------------------------------------------------------------------
find_tool() {  # find_tool NAME: prints the first executable candidate
    local name=$1 c
    local candidates=()
    [[ -n ${CUDA_HOME:-} ]] && candidates+=("$CUDA_HOME/bin/$name")
    [[ -n ${CUDA_PATH:-} ]] && candidates+=("$CUDA_PATH/bin/$name")
    c=$(command -v "$name" 2>/dev/null || true); [[ -n $c ]] && candidates+=("$c")
    candidates+=(/usr/local/cuda/bin/"$name" /usr/local/cuda-*/bin/"$name")
    if [[ $name == ncu ]]; then
        candidates+=(/opt/nvidia/nsight-compute/*/ncu /opt/nvidia/nsight-compute*/ncu
                     /usr/local/NVIDIA-Nsight-Compute*/ncu /usr/local/cuda*/nsight-compute*/ncu)
    else
        candidates+=("${CUDA_TOOLKIT_DIR:-$HOME/.cache/keet-cuda13}/cuda/bin/$name" /tmp/keet-cuda13/cuda/bin/"$name"
                     /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/bin/"$name"
                     /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_nvcc/bin/"$name")
    fi
    for c in "${candidates[@]}"; do
        if [[ -x $c && ! -d $c ]]; then echo "$c"; return 0; fi
    done
    return 1
}

mkdir -p "$build_dir"

# ---- build --------------------------------------------------------------------------------------------
if [[ $mode != profile ]]; then
    NVCC=${NVCC:-$(find_tool nvcc || true)}
    [[ -n $NVCC && -x $NVCC ]] || die "nvcc not found. Set NVCC=/path/to/nvcc or CUDA_HOME, or build elsewhere
  (for example here, with the PyPI-wheel toolkit: CUDA_TOOLKIT_DIR=/tmp/keet-cuda13 bash /work/shared/cuda/toolkit.sh;
  NVCC=/tmp/keet-cuda13/cuda/bin/nvcc scripts/profile-h100.sh --build-only), carry $build_dir to the GPU
  machine and run there with --profile-only."
    log "nvcc: $NVCC ($("$NVCC" --version | tail -1))"
    for prog in $programs; do
        src="$src_dir/$prog.cu"
        [[ -f $src ]] || die "$src not found"
        # -lineinfo: source correlation in the report; sm_90 SASS + compute_90 PTX; flags recorded for PROVENANCE
        cmd=("$NVCC" -O3 -lineinfo -arch=sm_90 -std=c++17 ${NVCC_FLAGS:-} -o "$build_dir/$prog" "$src")
        log "build $prog"
        "${cmd[@]}" || die "nvcc failed for $src"
        echo "${cmd[*]}" >"$build_dir/$prog.cmd"
    done
    [[ $mode == build ]] && { log "binaries in $build_dir"; exit 0; }
fi

# ---- profile ------------------------------------------------------------------------------------------
NCU=${NCU:-$(find_tool ncu || true)}
[[ -n $NCU && -x $NCU ]] || die "ncu (Nsight Compute CLI) not found. Set NCU=/path/to/ncu, or put it on PATH;
  searched CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute*, /usr/local/NVIDIA-Nsight-Compute*.
  The binaries are built (or can be, with --build-only); only profiling needs ncu and a GPU."
ncu_version=$("$NCU" --version 2>&1 | tail -1)
log "ncu: $NCU ($ncu_version)"
mkdir -p "$out"
timeout_s=${NCU_TIMEOUT:-300}

prov="$out/PROVENANCE.txt"
{
    echo "# written by scripts/profile-h100.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "ncu: $ncu_version"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    for prog in $programs; do [[ -f $build_dir/$prog.cmd ]] && echo "build $prog: $(sed "s#$repo/##g" "$build_dir/$prog.cmd")"; done
} >>"$prov"

failed=()
for pair in "${pairs[@]}"; do
    read -r prog kern <<<"$pair"
    bin="$build_dir/$prog"
    [[ -x $bin ]] || die "$bin not built (run without --profile-only, or carry $build_dir here)"
    rep="$out/$kern.ncu-rep"
    if [[ -f $rep && $force == 0 ]]; then log "skip $kern ($rep exists; --force to redo)"; continue; fi
    # One launch of one kernel: the program runs only KERNEL (argument), and ncu filters by name too.
    # --clock-control base: fixed clocks (comparable numbers); naming the .ncu-rep extension keeps the
    # uncompressed format (Nsight Compute 2026.3+ otherwise writes .ncu-repz).
    # --source-folders: the binaries may have been built elsewhere (other absolute source paths).
    cmd=("$NCU" --config-file off --set full --import-source yes --source-folders "$src_dir" --clock-control base
         --kernel-name-base function --kernel-name "regex:^${kern}\$" --launch-count 1
         ${NCU_EXTRA_METRICS:+--metrics "$NCU_EXTRA_METRICS"}
         --force-overwrite --export "$rep" "$bin" "$kern")
    log "profile $kern"
    if ! timeout "$timeout_s" "${cmd[@]}" >"$out/$kern.log" 2>&1 || [[ ! -s $rep ]]; then
        tail -20 "$out/$kern.log" >&2
        grep -q "ERR_NVGPUCTRPERM" "$out/$kern.log" && echo "profile-h100.sh: no permission for GPU counters: run as root, or with the nvidia module option NVreg_RestrictProfilingToAdminUsers=0" >&2
        failed+=("$kern"); continue
    fi
    echo "profile $kern: $(printf '%q ' "${cmd[@]}" | sed "s#$repo/##g; s#$out/##g")" >>"$prov"
    "$NCU" --import "$rep" --csv --page details >"$out/$kern.details.csv" || failed+=("$kern:details")
    "$NCU" --import "$rep" --csv --page raw >"$out/$kern.raw.csv" || failed+=("$kern:raw")
    for view in sass cuda,sass; do
        f="$out/$kern.source-${view/,/-}.csv"
        if ! "$NCU" --import "$rep" --csv --page source --print-source "$view" >"$f" 2>"$f.err" || [[ ! -s $f ]]; then
            echo "warning: $kern: source page ($view) not written: $(head -3 "$f.err")" >&2
            rm -f "$f"
        fi
        rm -f "$f.err"
    done
    rm -f "$out/$kern.log"
done

log "output in $out:"
du -ch "$out"/*.ncu-rep "$out"/*.csv 2>/dev/null | tail -1 | sed 's/total/total size/'
total_kb=$(du -ck "$out"/*.ncu-rep "$out"/*.csv 2>/dev/null | tail -1 | cut -f1)
((total_kb > 12 * 1024)) && echo "warning: $out holds ${total_kb} KiB; the suite should stay a few MB (see fixtures/h100/README.md)" >&2
if ((${#failed[@]})); then die "failed: ${failed[*]}"; fi
log "done; check the labels with: python3 scripts/check_h100_labels.py --dir $out"
