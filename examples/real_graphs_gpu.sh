#!/usr/bin/env bash
# The real-graph runs on a lent GPU machine (one GPU, 16 cores, no network),
# one call of at most 10 minutes: many runs side by side on the GPU
# (--jobs processes share it), each part resumed from the results committed
# in docs/source/_data/real_graphs/ and written to $OUT, from where they are
# copied back and committed; the next call resumes from them.
#
#     OUT=/out bash examples/real_graphs_gpu.sh budget   # first: s/epoch
#     OUT=/out bash examples/real_graphs_gpu.sh runs     # then, call by call
#
# budget: seconds per epoch of split 0 of every configuration of the parts
# below (benchmark/epoch_times.py), for the projection to write down before
# the runs, and whether batching the splits pays there
# (benchmark/batched_splits.py). runs: the parts in this order, until
# MINUTES (default 8) of the call are spent (examples/real_graphs.py
# --stop-after; the runs still going then are dropped and run again next
# time):
#   1. what is left of the CPU runs: Actor (paper_cpu, with CiteSeer) and
#      Minesweeper at depths 5 and 10 (paper_cpu_minesweeper); both were
#      complete on 2026-11-24, so this part only checks that;
#   2. Tolokers, paper recipe, depths 5 and 10 (paper_gpu_tolokers);
#   3. the strong recipe on Minesweeper and Tolokers (strong_gpu).
# After the call, copy $OUT/<folder>/results.csv (and plots/) over
# docs/source/_data/real_graphs/<folder>/ and commit.
#
# The data: DATA (default: gpu-data/, shared/data/ or ../shared/data/, laid
# out as ../shared/data) is copied to a temporary folder first. The device
# tool sends only the repository: copy ../shared/data to gpu-data/, list it
# in .git/info/exclude and carry it. DEVICE=cpu runs the same on a CPU (a
# dry run), JOBS sets the processes (default 12).
set -u
OUT="${OUT:-$PWD/gpu-out}"
PHASE="${1:-runs}"
MINUTES="${MINUTES:-8}"
JOBS="${JOBS:-12}"
DEVICE="${DEVICE:-cuda}"
RESULTS=docs/source/_data/real_graphs
HETERO_MODELS=(MLP GAT MLP+GAT FAGCN GATE)
start=$(date +%s)
mkdir -p "$OUT"

if [ -z "${DATA:-}" ]; then
    for d in gpu-data shared/data ../shared/data; do
        if [ -d "$d/heterophilous" ]; then DATA="$d"; break; fi
    done
fi
if [ -z "${DATA:-}" ]; then
    echo "no data: set DATA to a folder laid out as ../shared/data" >&2
    exit 2
fi
root=$(mktemp -d)
cp -r "$DATA"/. "$root"/

if [ "$DEVICE" = cuda ]; then
    PIP_DEFAULT_TIMEOUT=10 PIP_RETRIES=0 pip install --no-deps -e . >"$OUT/install.log" 2>&1 ||
        pip install --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

# part FOLDER ARGS...: resume FOLDER's committed runs in $OUT/FOLDER.
part() {
    local folder=$1
    shift
    local left
    left=$(python -c "print(round(($MINUTES * 60 - ($(date +%s) - $start)) / 60, 2))")
    if python -c "import sys; sys.exit(0 if $left > 0.5 else 1)"; then
        mkdir -p "$OUT/$folder"
        if [ -f "$RESULTS/$folder/results.csv" ] && [ ! -f "$OUT/$folder/results.csv" ]; then
            cp "$RESULTS/$folder/results.csv" "$OUT/$folder/"
        fi
        echo "$folder: $left minutes left" | tee -a "$OUT/summary.txt"
        python examples/real_graphs.py "$@" --device "$DEVICE" --jobs "$JOBS" \
            --threads 1 --resume --stop-after "$left" --data-root "$root" \
            --out "$OUT/$folder" >>"$OUT/$folder.log" 2>&1
        local rc=$?
        echo "$folder: rc=$rc $(grep -h 'stopped after\|Error' "$OUT/$folder.log" | tail -n 1)" |
            tee -a "$OUT/summary.txt"
    fi
}

if [ "$PHASE" = budget ]; then
    # Does batching the 10 splits of a configuration into one model pay on
    # the GPU? (On the 2-core CPU it does not beyond Texas:
    # benchmark/results/batched-splits-cpu/.)
    timeout 150 python benchmark/batched_splits.py --reps 3 -- --datasets \
        Minesweeper Tolokers --depths 5 --models MLP GAT GATE --splits \
        0 1 2 3 4 5 6 7 8 9 --device "$DEVICE" --data-root "$root" \
        --out-dir "$OUT/budget" >"$OUT/batched.log" 2>&1
    echo "batched splits: rc=$?" | tee -a "$OUT/summary.txt"
    python benchmark/epoch_times.py --epochs 3 -- --datasets Minesweeper \
        Tolokers --recipes paper strong --device "$DEVICE" --data-root "$root" \
        --out-dir "$OUT/budget" >"$OUT/budget.log" 2>&1
    echo "budget: rc=$?" | tee -a "$OUT/summary.txt"
else
    part paper_cpu --datasets CiteSeer Actor
    part paper_cpu_minesweeper --datasets Minesweeper --models "${HETERO_MODELS[@]}"
    part paper_gpu_tolokers --datasets Tolokers --models "${HETERO_MODELS[@]}"
    part strong_gpu --datasets Minesweeper Tolokers --recipes strong --no-plots
fi
rm -rf "$root"
echo "total: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
