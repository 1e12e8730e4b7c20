#!/usr/bin/env bash
# One call of the GPU run queue (gate_paper/run_queue.py) on a lent machine
# (one GPU, no network, a call of at most 10 minutes, at most 8 files back
# from $OUT), from the repository root:
#
#     OUT=/out COMMIT=<the checkout's commit> bash gate_paper/gpu_queue.sh
#
# (COMMIT, the full hash, is required where the checkout has no .git: every
# run file records it, and unpack refuses runs without it.)
# It runs the next unfinished runs of the queue's priority order for BUDGET
# seconds (default 420), PROCS processes sharing the GPU (default 8), and
# leaves $OUT/runs.tar, $OUT/summary.json and $OUT/log.txt, rewritten after
# every finished run. After the call, on the development machine:
#
#     python -m gate_paper.run_queue unpack <files_at>/runs.tar
#
# writes the runs into gate_paper/runs/ and rebuilds the docs' tables;
# commit them, and the next call goes on from there.
#
# DATA: the data root, laid out as PyG's dataset classes lay out their raw
# files (heterophilous/<name>/raw/<name>.npz); default: gpu-data/ when it
# holds heterophilous/, else run_queue's default ($GATE_DATA_ROOT, else
# data/; datasets it lacks are downloaded). The lent GPU machine has no
# network and receives the repository only: put the data root's
# heterophilous/ folder into gpu-data/, list gpu-data/ in .git/info/exclude
# and carry it. Further arguments go to `run_queue run` (e.g. --dry on a
# CPU).
set -eu
if [ -z "${DATA:-}" ] && [ -d gpu-data/heterophilous ]; then
    DATA=gpu-data
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Fail in seconds, not after the workers start, if a package is missing.
"${PYTHON:-python3}" -c 'import numpy, torch, torch_geometric' || {
    echo "missing packages: the queue needs numpy torch torch_geometric" >&2
    exit 3
}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
exec "${PYTHON:-python3}" -m gate_paper.run_queue run --out "${OUT:?set OUT}" \
    ${DATA:+--data-root "$DATA"} --procs "${PROCS:-8}" --budget "${BUDGET:-420}" \
    ${COMMIT:+--commit "$COMMIT"} "$@"
