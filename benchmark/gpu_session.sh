#!/usr/bin/env bash
# One call of a session with a GPU (9 minutes at most), from the
# repository root:
#
#     OUT=$OUT bash benchmark/gpu_session.sh            # issue 48's phases
#     OUT=$OUT bash benchmark/gpu_session.sh suite      # tests, deep, tables
#     OUT=$OUT bash benchmark/gpu_session.sh compiled   # compiled GATE
#     OUT=$OUT bash benchmark/gpu_session.sh tune       # the Triton tiles
#     DRY=1 OUT=/tmp/dry bash benchmark/gpu_session.sh  # CPU, tiny sizes
#
# Each phase runs in its own process under its own `timeout`; the script
# stops itself before TOTAL_SECONDS (default 530 s, DRY 800 s). Results
# are written after every configuration; after every phase the whole work
# folder is packed into $OUT/results.tar.gz and every table so far
# concatenated into $OUT/tables.md, so that a fault or a kill loses at
# most the phase it hit.
# $OUT holds 4 files: summary.txt (each phase's exit code and seconds),
# env.txt, tables.md and results.tar.gz (CSVs, logs). Every table records
# the commit, torch's and Triton's versions and the device.
#
# The default part (issue 48): `parity` (parity.py at 20,000 nodes; if it
# fails the Triton rows are left out of the timing phases), `tests` (the
# new kernels' tests and test_triton.py, compiled for the GPU), then the
# phases that share the time left by weight (SHARE): `host-ops` (ATen ops
# and launches of a step, host_ops.py), `profile` (GPU time per kernel
# next to wall time, syncs, gpu_profile.py: random-1e6 and products-size,
# 1 and 8 heads, fp32 and bf16), `variants` (the new kernels against those
# they may replace, triton_variants.py), `kernels` (random-1e6 and
# arxiv-size: Triton GATE against GATv2Conv eager and compiled, the
# baseline rerun in this call), `kernels-floor` (random-1e4), `turbo`
# (GATE's attention beside turbo-gnn's GATv2 kernel, turbo.py),
# `kernels-products` (products-size, a plain and a sorted EdgeIndex
# input), `deep` (a 3 x 256 full-batch step at products-size, deep.py)
# and `cuda-graphs` (a compiled step captured by CUDA graphs,
# test_cuda_graphs.py). turbo-gnn's GATv2 kernel is built in the
# background from the start (a CUDA source build: nvcc on the CPU while
# the GPU phases run, so it costs device time only if the turbo phase has
# to wait for it; its `timeout`, LIMIT_turbo_build, defaults to the time
# left before the last 150 s of the call) in a temporary folder outside
# the checkout, from the first of gpu-peers/turbo-gnn,
# shared/peers/turbo-gnn and ../shared/peers/turbo-gnn that exists
# (TURBO_SRC overrides); its log and time are results too.
#
# Without DRY=1 and a CUDA device that torch sees, it stops after env.txt
# (exit 4). DRY=1 runs the same phases on the CPU, the Triton kernels
# under the interpreter, at tiny sizes (turbo-gnn's build then fails at
# once: no CUDA, recorded). Test hooks: GATE_FAULT_PHASE="<phase> ..."
# makes those phases' processes die of SIGSEGV, GATE_HANG_PHASE=<phase>
# makes that one hang until its timeout; LIMIT_<phase>=<s> sets a phase's
# time limit (a dash in the name as an underscore: LIMIT_kernels_floor).
set -u
OUT="${OUT:-$PWD/gpu-out}"
PART="${1:-main}"
case "$PART" in
main | suite | compiled | tune) ;;
*)
    echo "unknown part '$PART' (expected main, suite, compiled or tune)" >&2
    exit 2
    ;;
esac
DRY="${DRY:-0}"
# The times given (empty: the default): whole seconds, or a usage error
# before anything runs ('abc' was an unset variable, '08' not a number,
# '-5' skipped every phase with exit 0).
for var in TOTAL_SECONDS $(compgen -v LIMIT_); do
    if [ -n "${!var:-}" ] && ! [[ "${!var}" =~ ^[1-9][0-9]*$ ]]; then
        echo "$var: expected whole seconds >= 1, got '${!var}'" >&2
        exit 2
    fi
done
START=$(date +%s)
# DRY: the interpreter on a CPU that tests share is slower than a GPU: more
# time, each phase's weight doubled (below).
[ "$DRY" = 1 ] && TOTAL_SECONDS=${TOTAL_SECONDS:-800}
DEADLINE=$((START + ${TOTAL_SECONDS:-530}))
# A folder the results can go to, before any phase spends device time:
if ! mkdir -p "$OUT" 2>/dev/null || ! [ -d "$OUT" ] || ! [ -w "$OUT" ]; then
    echo "OUT: expected a writable folder, got '$OUT'" >&2
    exit 2
fi
WORK="$(mktemp -d)"
DONE=()  # the phases run so far, in order (their tables go to tables.md)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "$DRY" = 1 ]; then
    export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES='' OMP_NUM_THREADS=1
    DEVICE=cpu
else
    unset TRITON_INTERPRET  # The kernels compile for the GPU.
    DEVICE=cuda
fi

pack() {  # The work folder into $OUT/results.tar.gz and the tables into
    # $OUT/tables.md, each atomically. GNU tar exits 1 when a file changed
    # as it read it (the turbo-gnn build's log, written in the background):
    # the archive is whole but that file's end, and it replaces the last.
    tar -czf "$OUT/.results.tar.gz" -C "$WORK" .
    if [ $? -le 1 ]; then
        mv "$OUT/.results.tar.gz" "$OUT/results.tar.gz"
    fi
    local name f
    : >"$OUT/.tables.md"
    for name in "${DONE[@]}"; do
        for f in "$WORK/$name"/*.md; do
            [ -e "$f" ] || continue
            printf '<!-- %s: %s -->\n' "$name" "$(basename "$f")" >>"$OUT/.tables.md"
            cat "$f" >>"$OUT/.tables.md"
            echo >>"$OUT/.tables.md"
        done
    done
    mv "$OUT/.tables.md" "$OUT/tables.md"
}

# The phases that share the time left (a phase's name and its weight, its
# limit when time is plenty): each gets its weight's share of the time
# left for those still to run, so that a short TOTAL_SECONDS or a slow
# phase shortens every later one instead of starving the last; time a
# phase leaves unused goes to those after it.
declare -A SHARE=()

phase() {  # phase NAME LIMIT COMMAND...: runs it in $WORK/NAME; LIMIT
    # "share": its share of the time left (SHARE).
    local name=$1 limit=$2 var="LIMIT_${1//-/_}" started rc w weight total=0
    shift 2
    local left=$((DEADLINE - $(date +%s) - 10))
    if [ "$limit" = share ]; then
        weight=${SHARE[$name]:?"$name has no weight in SHARE"}
        unset "SHARE[$name]"
        for w in "${SHARE[@]}"; do total=$((total + w)); done
        limit=$((left * weight / (total + weight)))
        [ "$limit" -gt "$weight" ] && limit=$weight
    fi
    limit=${!var:-$limit}
    if [ "$left" -lt 5 ] || [ "$limit" -lt 1 ]; then
        echo "$name: skipped (no time left)" | tee -a "$OUT/summary.txt"
        return 124
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    mkdir -p "$WORK/$name"
    if [[ " ${GATE_FAULT_PHASE:-} " == *" $name "* ]]; then
        set -- python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'
    elif [ "${GATE_HANG_PHASE:-}" = "$name" ]; then
        set -- sleep 100000
    fi
    started=$(date +%s)
    PHASE_DIR="$WORK/$name" PHASE_SECONDS=$((limit > 20 ? limit - 10 : limit / 2)) \
        timeout -k 5 "$limit" "$@" >"$WORK/$name/log.txt" 2>&1
    rc=$?
    echo "$name: rc=$rc$([ $rc = 124 ] && echo ' (timed out)')" \
        "($(($(date +%s) - started)) s of $limit)" | tee -a "$OUT/summary.txt"
    DONE+=("$name")
    pack
    return $rc
}

# What the session ran on, and what building turbo-gnn (a CUDA source
# build) needs: nvcc, the toolkit, the host compiler, torch's CUDA.
{
    date
    echo "part: $PART, DRY=$DRY, commit: $(git rev-parse HEAD 2>/dev/null)"
    git status --short 2>/dev/null | head -n 20
    nvidia-smi 2>&1 | head -n 15
    nvcc --version 2>&1 | tail -n 2
    ls -d /usr/local/cuda* 2>&1
    PYTHONPATH="$PWD/benchmark:$PYTHONPATH" python3 -c '
import report, triton
print("\n".join(report.machine_info() + report.build_info()))
print("- triton", triton.__version__)
'
} >"$OUT/env.txt" 2>&1
echo "env: $(grep -c . "$OUT/env.txt") lines" | tee "$OUT/summary.txt"
# Without a GPU that torch sees (a driver older than its CUDA build), every
# phase would run on the CPU or fail: stop at once, the device time kept.
if [ "$DRY" != 1 ] &&
    ! python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
    echo "no CUDA device: torch.cuda.is_available() is False (env.txt says" \
        "why); no phase ran" | tee -a "$OUT/summary.txt"
    exit 4
fi

DATA=()
for d in gpu-data "${GATE_DATA_ROOT:-data}"; do
    if [ -d "$d/Planetoid" ]; then DATA=(--data-root "$d"); break; fi
done
TURBO_SRC="${TURBO_SRC:-}"
if [ -z "$TURBO_SRC" ]; then
    for d in gpu-peers/turbo-gnn shared/peers/turbo-gnn ../shared/peers/turbo-gnn; do
        if [ -f "$d/csrc/gatv2/gatv2_kernel.cu" ]; then TURBO_SRC=$d; break; fi
    done
fi
if [ "$DRY" = 1 ]; then
    PARITY=(--nodes 12 --edges 40 --isolated 2 --input-loops 2 --heads 2
        --channels 2 --edge-dim 2 --dtypes float32)
    DTYPES=(float32)
    TESTS=(test/ops/test_triton_kernels_tiles.py -k 'loop_weights_match')
    HOST=(--graphs random-200 --heads 1 --kernels triton)
    VARIANTS=(--graphs random-100 --heads 1 --hidden 8 --reps 1 --warmup 0)
    PROFILE=(--graphs random-200 products-size --scale 2e-6 --heads 1
        --hidden 4 --channels 8 --dtypes float32)
    SIZE=(--scale 5e-6 --hidden 4 --channels 8 --heads 2 --reps 1
        --warmup 0 --devices cpu)
    DEEP=(--scale 2e-6 --hidden 8 --devices cpu)
    MAIN_GRAPHS=(arxiv-size)
    FLOOR=(random-100)
    PRODUCTS=(--scale 2e-6)
    TURBO=(--graphs random-100 --shapes 1x8 --dtypes float32 --reps 1)
    GATV2=(eager)
    LARGE=(products-size arxiv-size)
    SMALL=(random-100)
    TUNE=(--device cpu --graphs random-100 --heads 1 --hidden 4 --channels 8
        --forward-tiles 16 --backward-tiles 32 --reps 1 --warmup 0)
else
    PARITY=()
    DTYPES=(float32 bfloat16)
    TESTS=(test/ops/test_triton_kernels_tiles.py test/ops/test_triton.py
        -k 'not compile')
    HOST=(--graphs random-1e4 --heads 1 8 --kernels triton reference)
    VARIANTS=(--graphs random-1e6 arxiv-size --heads 1 8 --dtypes float32
        bfloat16)
    PROFILE=(--graphs random-1e6 products-size --heads 1 8
        --dtypes float32 bfloat16 --reps 5)
    SIZE=(--heads 1 8 --reps 5 --devices cuda)
    DEEP=(--devices cuda)
    MAIN_GRAPHS=(random-1e6 arxiv-size)
    FLOOR=(random-1e4)
    PRODUCTS=()
    TURBO=(--graphs random-1e6 arxiv-size products-size)
    GATV2=(eager compiled)
    LARGE=(products-size arxiv-size random-1e6)
    SMALL=(random-1e5 random-1e4)
    [ ${#DATA[@]} -gt 0 ] && SMALL+=(cora)
    TUNE=(--graphs random-1e6 arxiv-size --heads 1 8 --dtypes float32
        bfloat16)
fi

# shellcheck disable=SC2016
tests() {  # tests NAME LIMIT PYTEST_ARGS...: a phase of pytest; its log's
    # tail, under the machine's lines (commit, versions, device), is the
    # phase's table.
    local name=$1 limit=$2
    shift 2
    phase "$name" "$limit" sh -c 'python3 -m pytest -q -p no:cacheprovider \
        --durations=5 "$@" >"$PHASE_DIR/tests.log" 2>&1; rc=$?;
        { echo "# Tests: pytest $*"; echo;
          PYTHONPATH="$PWD/benchmark:$PYTHONPATH" python3 -c "import report
print(chr(10).join(report.machine_info()))"; echo;
          tail -n 15 "$PHASE_DIR/tests.log" | sed "s/^/    /"; } \
          >"$PHASE_DIR/tests.md"; exit $rc' sh "$@"
}

# shellcheck disable=SC2016
parity() {
    phase parity "$1" sh -c 'python3 benchmark/parity.py --out "$PHASE_DIR" "$@"' \
        sh "${PARITY[@]}"
}

case "$PART" in
main)
    # turbo-gnn's build, in the background from the start (nvcc on the
    # CPU while the GPU phases run), in a folder outside the checkout:
    TURBO_DIR="$(mktemp -d)"
    mkdir -p "$WORK/turbo-build"
    BUILD_LIMIT=${LIMIT_turbo_build:-$((DEADLINE - START - 150))}
    [ "$BUILD_LIMIT" -lt 60 ] && BUILD_LIMIT=60
    if [ -n "$TURBO_SRC" ]; then
        (
            started=$(date +%s)
            TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" MAX_JOBS=4 \
                timeout -k 5 "$BUILD_LIMIT" python3 \
                benchmark/turbo.py --build "$TURBO_DIR" --source "$TURBO_SRC" \
                --out "$WORK/turbo-build" >"$WORK/turbo-build/log.txt" 2>&1
            rc=$?
            echo "turbo-build: rc=$rc$([ $rc = 124 ] && echo ' (timed out)')" \
                "($(($(date +%s) - started)) s of $BUILD_LIMIT)" \
                >>"$OUT/summary.txt"
        ) &
        BUILD_PID=$!
    else
        echo "turbo-build: no turbo-gnn sources (gpu-peers/turbo-gnn," \
            "shared/peers/turbo-gnn, ../shared/peers/turbo-gnn)" |
            tee -a "$OUT/summary.txt" "$WORK/turbo-build/log.txt"
        BUILD_PID=
    fi
    KERNELS=(triton)
    parity 50
    if [ $? != 0 ]; then
        KERNELS=()
        echo "Triton left out: the parity check did not pass" |
            tee -a "$OUT/summary.txt"
    fi
    # Weights (SHARE) of the phases after the tests: those that time the
    # layer's kernels only when the parity check passed.
    SHARE=([host-ops]=30 [profile]=60 [turbo]=80 [cuda-graphs]=60)
    [ ${#KERNELS[@]} -gt 0 ] && SHARE+=([variants]=45 [kernels]=120
        [kernels-floor]=30 [kernels-products]=60 [deep]=45)
    if [ "$DRY" = 1 ]; then
        for w in "${!SHARE[@]}"; do SHARE[$w]=$((2 * SHARE[$w])); done
    fi
    tests tests 50 -x "${TESTS[@]}"
    # shellcheck disable=SC2016
    phase host-ops share sh -c 'python3 benchmark/host_ops.py \
        --out "$PHASE_DIR" "$@"' sh "${HOST[@]}"
    # shellcheck disable=SC2016
    phase profile share sh -c 'python3 benchmark/gpu_profile.py \
        --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" "$@"' sh \
        "${PROFILE[@]}"
    if [ ${#KERNELS[@]} -gt 0 ]; then
        # shellcheck disable=SC2016
        phase variants share sh -c 'python3 benchmark/triton_variants.py \
            --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" "$@"' sh \
            "${VARIANTS[@]}"
        # shellcheck disable=SC2016
        phase kernels share sh -c 'python3 benchmark/kernels.py \
            --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
            --name kernels "$@"' sh "${SIZE[@]}" --graphs "${MAIN_GRAPHS[@]}" \
            --dtypes "${DTYPES[@]}" --gatv2 "${GATV2[@]}" \
            --kernels "${KERNELS[@]}"
        # shellcheck disable=SC2016
        phase kernels-floor share sh -c 'python3 benchmark/kernels.py \
            --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
            --name kernels-floor "$@"' sh "${SIZE[@]}" --graphs "${FLOOR[@]}" \
            --dtypes "${DTYPES[@]}" --gatv2 eager --kernels triton reference
    fi
    [ -n "$BUILD_PID" ] && wait "$BUILD_PID"
    # shellcheck disable=SC2016
    phase turbo share sh -c 'python3 benchmark/turbo.py --compare "$0" \
        --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" "$@"' \
        "$TURBO_DIR" "${TURBO[@]}"
    if [ ${#KERNELS[@]} -gt 0 ]; then
        # shellcheck disable=SC2016
        phase kernels-products share sh -c 'python3 benchmark/kernels.py \
            --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
            --name kernels-products "$@"' sh "${SIZE[@]}" "${PRODUCTS[@]}" \
            --graphs products-size --inputs plain edge-index \
            --dtypes "${DTYPES[@]}" --gatv2 none --kernels triton
        # shellcheck disable=SC2016
        phase deep share sh -c 'python3 benchmark/deep.py \
            --graph products-size --depth 3 --hidden 256 --heads 1 \
            --layers GATE --out "$PHASE_DIR" "$@"' sh "${DEEP[@]}" \
            --kernels triton
    fi
    tests cuda-graphs share test/ops/test_cuda_graphs.py
    rm -rf "$TURBO_DIR"
    ;;
suite)
    KERNELS=(reference chunked triton)
    parity 120
    if [ $? != 0 ]; then
        KERNELS=(reference chunked)
        echo "Triton left out: the parity check did not pass" |
            tee -a "$OUT/summary.txt"
    fi
    tests tests 180 test/ops test/nn -k 'triton or cuda'
    # shellcheck disable=SC2016
    phase deep 130 sh -c 'python3 benchmark/deep.py --graph products-size \
        --depth 3 --hidden 256 --heads 1 --out "$PHASE_DIR" "$@"' \
        sh "${DEEP[@]}" --kernels "${KERNELS[@]}"
    # shellcheck disable=SC2016
    phase kernels-large 140 sh -c 'python3 benchmark/kernels.py \
        --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
        --name kernels-large "$@"' sh "${SIZE[@]}" --graphs "${LARGE[@]}" \
        --dtypes "${DTYPES[@]}" --gatv2 eager --kernels "${KERNELS[@]}"
    # shellcheck disable=SC2016
    phase kernels-small 90 sh -c 'python3 benchmark/kernels.py \
        --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
        --name kernels-small "$@"' sh "${SIZE[@]}" --graphs "${SMALL[@]}" \
        "${DATA[@]}" --dtypes "${DTYPES[@]}" --gatv2 eager \
        --kernels "${KERNELS[@]}"
    ;;
compiled)
    # shellcheck disable=SC2016
    phase kernels-compiled 500 sh -c 'python3 benchmark/kernels.py \
        --max-seconds "$PHASE_SECONDS" --out "$PHASE_DIR" \
        --name kernels-compiled "$@"' sh "${SIZE[@]}" \
        --graphs "${LARGE[@]:1}" --dtypes "${DTYPES[@]}" \
        --gatv2 eager compiled --kernels triton --gate-compiled
    ;;
tune)
    # shellcheck disable=SC2016
    phase tune 500 sh -c 'python3 benchmark/triton_tune.py \
        --out "$PHASE_DIR" "$@"' sh "${TUNE[@]}"
    ;;
esac
echo "total: $(($(date +%s) - START)) s" | tee -a "$OUT/summary.txt"
pack
rm -rf "$WORK"
