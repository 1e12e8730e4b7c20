#!/usr/bin/env bash
# One call of a session with a GPU (10 minutes at most): install, the CUDA
# tests (the Triton kernels compiled, not interpreted), then the kernel
# suite of benchmark/conv.py. Everything goes to $OUT (default:
# ./gpu-out). Run from the repository root:
#
#     bash benchmark/gpu_session.sh          # tests, then the benchmark
#     bash benchmark/gpu_session.sh tests    # only the tests
#     bash benchmark/gpu_session.sh bench    # only the benchmark
#     bash benchmark/gpu_session.sh tune     # the kernels' tiles (a call
#                                            # of its own, after the tests)
#
# The benchmark gets the time left of a 540 s budget (--suite-max-seconds;
# the configs past it are recorded as skipped), so that one call fits.
set -u
OUT="${OUT:-$PWD/gpu-out}"
PHASE="${1:-all}"
BUDGET="${BUDGET:-540}"
mkdir -p "$OUT"
start=$(date +%s)
unset TRITON_INTERPRET  # The tests compile the kernels on the GPU.
{
    date
    nvidia-smi || true
    python -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))'
} >"$OUT/env.txt" 2>&1

# No network on the GPU machine: give up on the index fast (pip waits up to
# 180 s a try here), fall back to no build isolation, and put
# the checkout first on the path whatever pip did.
PIP_DEFAULT_TIMEOUT=10 PIP_RETRIES=0 pip install --no-deps -e . >"$OUT/install.log" 2>&1 ||
    pip install --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1
echo "install: rc=$?" | tee "$OUT/summary.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ "$PHASE" = all ] || [ "$PHASE" = tests ]; then
    python -m pytest -q -p no:cacheprovider test/ops test/nn \
        -k 'triton or cuda' --durations=15 >"$OUT/tests.log" 2>&1
    echo "tests: rc=$? ($(tail -n 1 "$OUT/tests.log"))" | tee -a "$OUT/summary.txt"
fi

if [ "$PHASE" = all ] || [ "$PHASE" = bench ]; then
    left=$((BUDGET - ($(date +%s) - start) - 30))
    [ "$left" -lt 60 ] && left=60
    # Cora from gpu-data/ (../shared/data copied into the checkout and
    # carried, as for examples/real_graphs_gpu.sh), shared/data/ or
    # ../shared/data/; without any, Cora is recorded as 'no graph'.
    DATA=()
    for d in gpu-data shared/data ../shared/data; do
        if [ -d "$d/Planetoid" ]; then DATA=(--data-root "$d"); break; fi
    done
    python benchmark/conv.py --kernels --devices cuda \
        --heads 1 8 --dtypes float32 bfloat16 --hidden 64 --channels 64 \
        --compile eager compiled --warmup 1 --reps 5 \
        --suite-max-seconds "$left" "${DATA[@]}" \
        --out "$OUT" --name gpu --plot >"$OUT/bench.log" 2>&1
    echo "bench: rc=$? (budget ${left}s)" | tee -a "$OUT/summary.txt"
fi
if [ "$PHASE" = tune ]; then
    timeout "$BUDGET" python benchmark/triton_tune.py --graphs random-1e6 \
        arxiv-size --heads 1 8 --dtypes float32 bfloat16 \
        --out "$OUT/tune" >"$OUT/tune.log" 2>&1
    echo "tune: rc=$?" | tee -a "$OUT/summary.txt"
fi
echo "total: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
