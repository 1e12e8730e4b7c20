#!/usr/bin/env bash
# The real-graph runs that need a GPU, on a lent machine (one GPU, no
# network, one call of at most 10 minutes, at most 8 files back from $OUT):
#
#     OUT=/out bash gate_paper/real_graphs_gpu.sh
#
# Parts, in this order, each resumed from its committed run folder
# docs/source/_data/runs/<study>/ (copied to a work folder first):
#   1. real_graphs_tolokers: Tolokers, the paper's recipe, depths 5 and 10,
#      the models of the paper's Table 2;
#   2. real_graphs_strong: the strong recipe on Minesweeper and Tolokers.
# Each part runs `python3 -m gate_paper.real_graphs` under `timeout` with
# what is left of BUDGET seconds (default 540), so the call ends before 9.5
# minutes; SIGTERM stops the runner's workers and every finished run is
# already its own file. The work folder is packed into $OUT/runs.tar.gz
# every 60 s and after each part; with the logs and summary.txt, $OUT holds
# 3 files. After the call: tar xzf runs.tar.gz -C docs/source/_data/runs
# and commit; the next call resumes from there.
#
# DATA: a data root of PyG's datasets holding heterophilous/ (default:
# gpu-data/ or shared/data/; the device tool sends only the repository:
# copy the heterophilous sets to gpu-data/, list it in .git/info/exclude
# and carry it); it is copied to a temporary folder first, as PyG writes
# its processed files into the data root. JOBS: processes sharing the GPU
# (default 8). DRY=1: the same plumbing on the CPU with tiny runs (depth 1,
# split 0, 2 epochs, width 8, GAT and GATE), for the tests.
set -u
OUT="${OUT:-$PWD/gpu-out}"
BUDGET="${BUDGET:-540}"
JOBS="${JOBS:-8}"
RUNS=docs/source/_data/runs
start=$(date +%s)
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ -z "${DATA:-}" ]; then
    for d in gpu-data shared/data; do
        if [ -d "$d/heterophilous" ]; then DATA="$d"; break; fi
    done
fi
if [ -z "${DATA:-}" ]; then
    echo "no data: set DATA to a data root holding heterophilous/" >&2
    exit 2
fi
data_copy=$(mktemp -d)
cp -r "$DATA/heterophilous" "$data_copy/" || exit 2
DATA="$data_copy"

if [ "${DRY:-0}" = 1 ]; then
    extra=(--device cpu --depths 1 --splits 0 --max-epochs 2 --hidden 8)
    models=(GAT GATE)
    strong=(--models GAT GATE)
else
    extra=(--device cuda)
    models=(MLP GAT MLP+GAT FAGCN GATE)
    strong=()  # the strong recipe's own models
fi

work=$(mktemp -d)
pack() {  # the work folder into $OUT/runs.tar.gz, atomically
    tar czf "$OUT/.runs.tar.gz" -C "$work" . && mv "$OUT/.runs.tar.gz" "$OUT/runs.tar.gz"
}
(
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep 60 &
        nap=$!
        wait "$nap"
        pack
    done
) >/dev/null 2>&1 &
packer=$!

# part STUDY ARGS...: resume STUDY's committed runs under the time left.
part() {
    local study=$1
    shift
    local left=$((BUDGET - ($(date +%s) - start)))
    if [ "$left" -lt 30 ]; then
        echo "$study: skipped, ${left} s left" | tee -a "$OUT/summary.txt"
        return
    fi
    mkdir -p "$work/$study"
    if [ -d "$RUNS/$study" ]; then cp -r "$RUNS/$study/." "$work/$study/"; fi
    timeout --signal=TERM --kill-after=15 "$left" python3 -m gate_paper.real_graphs \
        "$@" "${extra[@]}" --jobs "$JOBS" --threads 1 --no-plots --resume \
        --data-root "$DATA" --out-dir "$work/$study" >>"$OUT/logs.txt" 2>&1
    local rc=$?
    local n
    n=$(find "$work/$study" -maxdepth 1 -name '*.json' | wc -l)
    echo "$study: rc=$rc, $n run files, $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
    pack
}

part real_graphs_tolokers --datasets Tolokers --models "${models[@]}"
part real_graphs_strong --datasets Minesweeper Tolokers --recipes strong \
    "${strong[@]}"
kill "$packer" 2>/dev/null
pack
rm -rf "$work" "$data_copy"
echo "total: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
