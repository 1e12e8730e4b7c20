#!/usr/bin/env bash
# One call of a session with a GPU (10 minutes at most), from the
# repository root:
#
#     OUT=$OUT bash benchmark/gpu_session.sh            # the first call
#     OUT=$OUT bash benchmark/gpu_session.sh compiled   # a later call
#     OUT=$OUT bash benchmark/gpu_session.sh tune       # the Triton tiles
#     DRY=1 OUT=/tmp/dry bash benchmark/gpu_session.sh  # CPU, tiny sizes
#
# Each phase runs in its own process under its own `timeout`; the script
# stops itself before 9.5 minutes. Results are written after every
# configuration; after every phase the whole work folder is packed into
# $OUT/results.tar.gz and the phase's table copied to $OUT, so that a
# fault or a kill loses at most the phase it hit. $OUT holds at most 8
# files: summary.txt, env.txt, results.tar.gz and the tables. The first
# call runs the at-scale parity check (Triton is left out of the rest if
# it fails), the CUDA tests, the deep products-size step and the largest
# graphs before the small ones; compiled GATv2Conv (30-60 s of Inductor
# per heads and dtype) beside Triton GATE, eager and compiled, is the
# second call's. On an H100
# the first call took 312-330 s and the second 140 s: with 15 minutes of
# device time, give the second what is left: TOTAL_SECONDS=<s> caps a
# call (default 565 s).
#
# DRY=1 runs the same phases on the CPU, the Triton kernels under the
# interpreter, at tiny sizes. Test hooks: GATE_FAULT_PHASE="<phase> ..."
# makes those phases' processes die of SIGSEGV, GATE_HANG_PHASE=<phase>
# makes that one hang until its timeout; LIMIT_<phase>=<s> sets a phase's
# time limit (a dash in the name as an underscore: LIMIT_kernels_large).
set -u
OUT="${OUT:-$PWD/gpu-out}"
PART="${1:-main}"
case "$PART" in
main | compiled | tune) ;;
*)
    echo "unknown part '$PART' (expected main, compiled or tune)" >&2
    exit 2
    ;;
esac
DRY="${DRY:-0}"
START=$(date +%s)
DEADLINE=$((START + ${TOTAL_SECONDS:-565}))
mkdir -p "$OUT"
WORK="$(mktemp -d)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DRY" = 1 ]; then
    export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES='' OMP_NUM_THREADS=1
    DEVICE=cpu
else
    unset TRITON_INTERPRET  # The kernels compile for the GPU.
    DEVICE=cuda
fi

pack() {  # The work folder into $OUT/results.tar.gz, atomically.
    tar -czf "$OUT/.results.tar.gz" -C "$WORK" . &&
        mv "$OUT/.results.tar.gz" "$OUT/results.tar.gz"
}

phase() {  # phase NAME DEFAULT_LIMIT COMMAND...: runs it in $WORK/NAME.
    local name=$1 limit=$2 var="LIMIT_${1//-/_}" started rc
    shift 2
    limit=${!var:-$limit}
    local left=$((DEADLINE - $(date +%s) - 10))
    if [ "$left" -lt 5 ]; then
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
    for f in "$WORK/$name"/*.md; do
        [ -e "$f" ] && cp "$f" "$OUT/$(basename "$f")"
    done
    pack
    return $rc
}

# What the session ran on, and what building turbo-gnn (a CUDA source
# build) would need: nvcc, the toolkit, the host compiler, torch's CUDA.
{
    date
    echo "part: $PART, DRY=$DRY, commit: $(git rev-parse HEAD 2>/dev/null)"
    nvidia-smi 2>&1 | head -n 15
    nvcc --version 2>&1 | tail -n 2
    ls -d /usr/local/cuda* 2>&1
    PYTHONPATH="$PWD/benchmark:$PYTHONPATH" python3 -c '
import common, report, triton
print("\n".join(report.machine_info() + report.build_info()))
print("- triton", triton.__version__)
try:
    import turbo_gnn
    print("- turbo_gnn", getattr(turbo_gnn, "__version__", "present"))
except ImportError:
    print("- turbo_gnn: not installed (a CUDA source build, no network here)")
'
} >"$OUT/env.txt" 2>&1
echo "env: $(grep -c . "$OUT/env.txt") lines" | tee "$OUT/summary.txt"

DATA=()
for d in gpu-data shared/data ../shared/data; do
    if [ -d "$d/Planetoid" ]; then DATA=(--data-root "$d"); break; fi
done
if [ "$DRY" = 1 ]; then
    PARITY=(--nodes 12 --edges 40 --isolated 2 --input-loops 2 --heads 2
        --channels 2 --edge-dim 2 --dtypes float32)
    DTYPES=(float32)
    TESTS=(test/ops/test_triton.py -k 'dropout_seeded')
    SIZE=(--scale 5e-6 --hidden 4 --channels 8 --heads 2 --reps 1
        --warmup 0 --devices cpu)
    DEEP=(--scale 2e-6 --hidden 8 --devices cpu)
    LARGE=(products-size arxiv-size)
    SMALL=(random-100)
else
    PARITY=()
    TESTS=(test/ops test/nn -k 'triton or cuda')
    SIZE=(--heads 1 8 --reps 5 --devices cuda)
    DEEP=(--devices cuda)
    LARGE=(products-size arxiv-size random-1e6)
    SMALL=(random-1e5 random-1e4)
    DTYPES=(float32 bfloat16)
    [ ${#DATA[@]} -gt 0 ] && SMALL+=(cora)
fi

case "$PART" in
main)
    KERNELS=(reference chunked triton)
    # shellcheck disable=SC2016
    phase parity 120 sh -c 'python3 benchmark/parity.py --out "$PHASE_DIR" "$@"' \
        sh "${PARITY[@]}"
    if [ $? != 0 ]; then
        KERNELS=(reference chunked)
        echo "Triton left out: the parity check did not pass" |
            tee -a "$OUT/summary.txt"
    fi
    phase tests 180 sh -c 'python3 -m pytest -q -p no:cacheprovider \
        --durations=10 "$@" >"$PHASE_DIR/tests.log" 2>&1; rc=$?;
        tail -n 25 "$PHASE_DIR/tests.log" >"$PHASE_DIR/tests.md"; exit $rc' \
        sh "${TESTS[@]}"
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
    phase tune 500 sh -c 'python3 benchmark/triton_tune.py --graphs \
        random-1e6 arxiv-size --heads 1 8 --dtypes float32 bfloat16 \
        --out "$PHASE_DIR"'
    ;;
esac
echo "total: $(($(date +%s) - START)) s" | tee -a "$OUT/summary.txt"
pack
rm -rf "$WORK"
