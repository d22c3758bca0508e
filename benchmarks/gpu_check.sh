#!/usr/bin/env bash
# Every GPU measurement of gpuplan in one run (issue 6), in under 8 minutes, all results under
# "$OUT" (default ./gpu-results): JSON from `gpuplan bench`, text tables, the measured roofline
# chart, the side-by-side checks and the GPU tests. Run from the repository root on a machine
# with a CUDA GPU and a CUDA build of PyTorch:
#     OUT=/tmp/gpu-results PYTHON=python3 bash benchmarks/gpu_check.sh
# Each step has its own time limit; a global deadline skips steps that would not fit.
# DEVICE=cpu runs the same steps on the CPU (a dry run of this script where there is no GPU).
# ONLY_PROFILE=1 runs only the `gpuplan profile` steps (issue 13; about 5 minutes).
set -u -o pipefail

OUT="${OUT:-./gpu-results}"
PY="${PYTHON:-python3}"
DEADLINE="${DEADLINE_S:-470}"
DEVICE="${DEVICE:-cuda}"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)/src"
export XDG_CACHE_HOME="$OUT/cache"   # the saved profile lands under $OUT too
LOG="$OUT/summary.txt"
: > "$LOG"

say() { echo "[$(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }

# step NAME LIMIT_S COMMAND...: run with a time limit if the deadline allows; record rc
step() {
    local name="$1" limit="$2"; shift 2
    if [[ "${ONLY_PROFILE:-0}" == 1 && "$name" != *profile* ]]; then return 0; fi
    local left=$((DEADLINE - SECONDS))
    if (( left < 20 )); then say "SKIP $name: ${left}s left before the deadline"; return 0; fi
    (( limit > left )) && limit=$left
    say "START $name (limit ${limit}s)"
    timeout --signal=INT --kill-after=10 "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    local rc=$?
    say "END $name rc=$rc"
    return 0
}

say "gpu_check: OUT=$OUT python=$($PY -c 'import sys; print(sys.version.split()[0])' 2>&1)"
nvidia-smi > "$OUT/nvidia-smi-start.txt" 2>&1 || say "nvidia-smi not available"
NGPU=$($PY -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
say "torch sees $NGPU GPU(s): $($PY -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")' 2>&1)"
if [[ "$DEVICE" == "cpu" ]]; then
    NGPU=2; say "DEVICE=cpu: dry run on the CPU (collectives: 2 gloo processes)"
elif [[ "$NGPU" == "0" ]]; then
    say "no CUDA GPU visible: nothing to measure (DEVICE=cpu for a dry run)"; exit 1
fi

G=(-m gpuplan.cli.main)
# 1. quick bench first: a result even if the full run does not finish
step bench-quick 90 "$PY" "${G[@]}" bench --device "$DEVICE" --quick --json --compare --no-progress
# 2. the full bench: matmul per dtype, memory, host-device, launch, fusion, attention
step bench-full 240 "$PY" "${G[@]}" bench --device "$DEVICE" --json --compare --no-progress \
    --plot "$OUT/roofline-measured.png"
# 3. the same as tables (from the quick run's settings: fast)
step bench-table 60 "$PY" "${G[@]}" bench --device "$DEVICE" --quick --compare --no-progress \
    --only matmul,memory,launch --no-save
# 4. collectives over all GPUs (NCCL), when there is more than one
if (( NGPU > 1 )); then
    step collectives 90 "$PY" "${G[@]}" bench --device "$DEVICE" --only collectives \
        --nproc "$NGPU" --json --no-progress
else
    say "SKIP collectives: one GPU (collectives need >= 2 processes)"
fi
# 4b. the measured decode check (issue 11): a transformers decoder's TTFT/TPOT on the GPU next
#     to the serving model's prediction from the profile measured in the same run
step decode 120 "$PY" "${G[@]}" bench --device "$DEVICE" --only decode --quick --json \
    --no-progress --no-save
# 5. gpuplan's ceilings against direct loops, side by side
step side-by-side 90 "$PY" benchmarks/bench_measure.py --device "$DEVICE"
# 6. the GPU tests (skipped on CPU-only machines)
step pytest-gpu 60 "$PY" -m pytest -q -p no:cacheprovider tests/test_measure.py -k "cuda or gpu"
# 7. gpuplan profile on real scripts (issue 13): blocking pageable copies (expect pageable_copy
#    advice first, device idle gaps), a GPT-2 from a config (predicted vs measured on this GPU),
#    one .item() per step (host_sync: the device idle the sync causes), and the GPU profile test
S=tests/profile_scripts
step profile-pageable 90 "$PY" "${G[@]}" profile "$S/pageable.py" --steps 5 --warmup 3 --json \
    --trace "$OUT/profile-pageable-trace.json" --html "$OUT/profile-pageable.html" -- "$DEVICE"
step profile-gpt2 120 "$PY" "${G[@]}" profile "$S/gpt2_tiny.py" --steps 5 --warmup 2 --json \
    --html "$OUT/profile-gpt2.html" -- "$DEVICE"
step profile-gpt2-table 120 "$PY" "${G[@]}" profile "$S/gpt2_tiny.py" --steps 5 --warmup 2 \
    -- "$DEVICE"
step profile-item 90 "$PY" "${G[@]}" profile "$S/item_per_step.py" --steps 5 --warmup 2 --json
step pytest-profile-gpu 90 "$PY" -m pytest -q -p no:cacheprovider tests/test_profile.py -m gpu

nvidia-smi > "$OUT/nvidia-smi-end.txt" 2>&1 || true
say "done in ${SECONDS}s; files:"
ls -la "$OUT" | tee -a "$LOG"
