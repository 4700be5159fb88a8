#!/usr/bin/env bash
# One call on a lent GPU: the card and versions, benchmarks/gpu.py, then pretraining the next
# default model (`small` on WikiText-2 + en-extra, TF32) with the minutes left. TF32, not bf16:
# the 2026-11-26 run in bf16 was unstable, and training was host-bound, as fast in either. Leaves under
# OUT_DIR: gpu.json, gpu.md, gpu_run.log, and the run (metrics, run.json, the fp16 weights) as
# train.tar.part-* pieces of at most 15 MiB (join with `cat train.tar.part-* | tar x`).
#
#   benchmarks/gpu_data.sh .gpu-data                      # here, once: the data it reads
#   benchmarks/gpu_run.sh OUT_DIR [MINUTES] [DATA_DIR]    # there (default 8 minutes, .gpu-data)
#
# It installs nothing: the package runs from src/ (PYTHONPATH), on the machine's own torch.
# ELMO_DEVICE=cpu ELMO_QUICK=1 runs it end to end on a CPU with tiny sizes (a test does);
# PYTHON names the interpreter (default python3); GPU_BENCH_ARGS adds options of gpu.py.
set -uo pipefail
out=${1:?usage: gpu_run.sh OUT_DIR [MINUTES] [DATA_DIR]}
minutes=${2:-8}
data=${3:-.gpu-data}
device=${ELMO_DEVICE:-cuda}
python=${PYTHON:-python3}
quick=${ELMO_QUICK:+--quick}
bench_minutes=${GPU_BENCH_MINUTES:-3}
start=$(date +%s)
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$here/src:$here/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TQDM_MININTERVAL=15
mkdir -p "$out"
exec > >(tee "$out/gpu_run.log") 2>&1

echo "== the machine"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv 2>/dev/null || true
"$python" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"

echo "== the tests of the device paths (CUDA ones run here only)"
(cd "$here" && timeout 120 "$python" -m pytest -q -x -p no:cacheprovider \
    tests/test_step_loops.py tests/test_device_memory.py 2>&1 | tail -5)

echo "== benchmarks/gpu.py (${bench_minutes} min)"
"$python" "$here/benchmarks/gpu.py" --device "$device" --out "$out" --minutes "$bench_minutes" \
    --data "$data" --fixtures "$data/fixtures" $quick ${GPU_BENCH_ARGS:-}

echo "== pretraining with the time left"
work=$(mktemp -d)
left=$(( minutes * 60 - ($(date +%s) - start) - 45 ))  # 45 s to pack the results
if [ "$left" -lt 60 ]; then
    echo "only ${left}s left: no pretraining"
    exit 0
fi
# Steps that fit: the faster batch size of `small` in gpu.json, 80% of its speed over the
# seconds left after ~40 s of corpus scan and evaluations (quick: a few steps).
read -r batch steps < <("$python" - "$out/gpu.json" "$left" "${ELMO_QUICK:-}" <<'PY'
import json, sys
data, left, quick = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
if quick:
    print(8, 6)
    raise SystemExit
rows = [r for r in data.get("training", []) if r["preset"] == "small"]
best = max(rows, key=lambda r: r["tokens_per_s"]) if rows else {"batch_size": 128,
                                                                 "tokens_per_s": 50000}
seconds = max(left - 40, 30)
print(best["batch_size"], max(10, int(0.8 * best["tokens_per_s"] * seconds / (best["batch_size"] * 20))))
PY
)
preset=${ELMO_QUICK:+tiny}
preset=${preset:-small}
echo "preset $preset, batch $batch, $steps steps, at most $(( left / 60 )) min"
"$python" -m elmo train --train "$data/train.txt.gz" "$data"/en-extra/*.train.txt.gz \
    --valid "$data/valid.txt" --out "$work/run" --preset "$preset" --precision tf32 \
    --device "$device" --batch-size "$batch" --optimizer adam --lr 0.004 \
    --schedule slanted-triangular --warmup-frac 0.05 --max-steps "$steps" \
    --max-minutes "$(awk "BEGIN { print ($left - 40) / 60 }")" --eval-every "$(( steps / 4 + 1 ))" \
    --checkpoint-every "$(( steps + 1 ))" --log-every 100 --seed 0 \
    --weights-copy "$work/weights"
status=$?
echo "elmo train exited with $status"
(cd "$work" && tar cf - weights run/metrics.jsonl run/run.json run/vocab.txt 2>/dev/null) \
    | split -b 15M - "$out/train.tar.part-"
ls -l "$out"
exit $status
