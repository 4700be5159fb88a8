#!/usr/bin/env bash
# One call on a lent GPU: the card and versions, the device tests, benchmarks/gpu.py's training
# section, then pretraining the next default model with the minutes left. Leaves under
# OUT_DIR: gpu.json, gpu.md, gpu_run.log, and the run (metrics, run.json, the fp16
# weights; the checkpoint if TRAIN_BRING_CHECKPOINT=1) as train.tar.part-* pieces of at most
# 15 MiB (join with `cat train.tar.part-* | tar x`).
#
#   benchmarks/gpu_data.sh .gpu-data                      # here, once: the data it reads
#   benchmarks/gpu_run.sh OUT_DIR [MINUTES] [DATA_DIR]    # there (default 10 minutes, .gpu-data)
#
# The budget of one call of 15 minutes of device time, the machine's start included (a command
# may run 10 minutes at most; MINUTES is this command's):
#   ~3 min     the machine starts (before this script)
#   <= 2.5 min the device tests (CUDA graphs, cuDNN, the graphed training step; timeout 150 s)
#   ~4.5 min   gpu.py's training section (GPU_BENCH_MINUTES; `original` and `small`, 128 and
#              512 rows, bf16 and TF32, graphs and eager, cuDNN and the clipped reference: 16
#              runs of about 5-15 s each, in order of importance; what is measured by then is
#              written, the rest skipped)
#   the rest   pretraining (MINUTES=10: about 3 min), a checkpoint every minute, so that the
#              call may end at any time. A second command in the same call (or a later call
#              given the unpacked run) with the same TRAIN_RUN_DIR resumes it:
#              GPU_SKIP_TESTS=1 GPU_BENCH_MINUTES=0 TRAIN_RUN_DIR=... gpu_run.sh OUT2 MINUTES
#
# It installs nothing: the package runs from src/ (PYTHONPATH), on the machine's own torch.
# ELMO_DEVICE=cpu ELMO_QUICK=1 runs it end to end on a CPU with tiny sizes (a test does);
# PYTHON names the interpreter (default python3); GPU_BENCH_ARGS replaces gpu.py's section
# options (default: the training section alone); TRAIN_PRESET (default small) and TRAIN_ARGS
# (more `elmo train` options, e.g. --no-lstm-clip) shape the pretraining; TRAIN_CORPUS, a
# prepared corpus (`elmo prepare-corpus`; it may hold only the shards this call reaches),
# replaces the text of DATA_DIR, with its held-out.txt as validation if it has one.
set -uo pipefail
out=${1:?usage: gpu_run.sh OUT_DIR [MINUTES] [DATA_DIR]}
minutes=${2:-10}
data=${3:-.gpu-data}
device=${ELMO_DEVICE:-cuda}
python=${PYTHON:-python3}
quick=${ELMO_QUICK:+--quick}
bench_minutes=${GPU_BENCH_MINUTES:-4.5}
bench_args=${GPU_BENCH_ARGS:---skip correctness embedding memory bert}
train_preset=${TRAIN_PRESET:-small}
train_args=${TRAIN_ARGS:-}
if [ -n "${TRAIN_CORPUS:-}" ]; then
    train_inputs=("$TRAIN_CORPUS")
    valid=$TRAIN_CORPUS/held-out.txt
else
    train_inputs=("$data/train.txt.gz" "$data"/en-extra/*.train.txt.gz)
    valid=$data/valid.txt
fi
[ -f "$valid" ] || valid=$data/valid.txt
start=$(date +%s)
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$here/src:$here/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TQDM_MININTERVAL=15
mkdir -p "$out"
exec > >(tee "$out/gpu_run.log") 2>&1

echo "== the machine"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv 2>/dev/null || true
"$python" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'available', torch.cuda.is_available())"

if [ -z "${GPU_SKIP_TESTS:-}" ]; then
    echo "== the tests of the device paths (CUDA ones run here only)"
    (cd "$here" && timeout 150 "$python" -m pytest -q -p no:cacheprovider \
        tests/test_train_step.py tests/test_lstm_backends.py tests/test_step_loops.py \
        tests/test_train_device.py tests/test_device_memory.py 2>&1 | tail -15)
fi

if [ "$bench_minutes" != 0 ]; then
    echo "== benchmarks/gpu.py (${bench_minutes} min)"
    # shellcheck disable=SC2086
    "$python" "$here/benchmarks/gpu.py" --device "$device" --out "$out" \
        --minutes "$bench_minutes" --data "$data" --fixtures "$data/fixtures" $quick $bench_args
fi

echo "== pretraining with the time left"
run_dir=${TRAIN_RUN_DIR:-$(mktemp -d)/run}
weights="$(dirname "$run_dir")/weights"
left=$(awk "BEGIN { printf \"%d\", $minutes * 60 - $(( $(date +%s) - start )) - 45 }")  # 45 s to pack
if [ "$left" -lt 60 ]; then
    echo "only ${left}s left: no pretraining"
    exit 0
fi
# Steps that fit: the fastest measured run of the preset with the same LSTM (clipped:
# reference back end; --no-lstm-clip: cuDNN), 70% of its speed over the seconds left after
# ~40 s of corpus scan and evaluations (quick: a few steps). A whole run reads, checkpoints
# and evaluates beside its steps: on an H100 `compact` trained at 72% of gpu.py's step.
lstm=reference
case " $train_args " in *" --no-lstm-clip "*) lstm=cudnn ;; esac
read -r batch steps < <("$python" - "$out/gpu.json" "$left" "$train_preset" "$lstm" \
                        "${ELMO_QUICK:-}" <<'PY'
import json, sys
from pathlib import Path
report, left, preset, lstm, quick = Path(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:]
if quick:
    print(8, 6)
    raise SystemExit
rows = json.loads(report.read_text()).get("training", []) if report.exists() else []
rows = [r for r in rows if r["preset"] == preset and r["lstm"] == lstm]
best = max(rows, key=lambda r: r["tokens_per_s"]) if rows else {"batch_size": 128,
                                                                 "tokens_per_s": 50000}
seconds = max(left - 40, 30)
print(best["batch_size"], max(10, int(0.7 * best["tokens_per_s"] * seconds / (best["batch_size"] * 20))))
PY
)
preset=${ELMO_QUICK:+tiny}
preset=${preset:-$train_preset}
echo "preset $preset ($lstm LSTM), batch $batch, $steps steps, at most $(( left / 60 )) min, in $run_dir"
echo "training on ${train_inputs[*]}, validating on $valid"
# shellcheck disable=SC2086
"$python" -m elmo train --train "${train_inputs[@]}" \
    --valid "$valid" --out "$run_dir" --preset "$preset" --precision tf32 \
    --device "$device" --batch-size "$batch" --optimizer adam --lr 0.002 --clip-norm 1.0 --softmax full \
    --schedule slanted-triangular --warmup-frac 0.05 --max-steps "$steps" \
    --max-minutes "$(awk "BEGIN { print ($left - 40) / 60 }")" --eval-every "$(( steps / 4 + 1 ))" \
    --checkpoint-every "$(( steps + 1 ))" --checkpoint-minutes 1 --log-every 100 --seed 0 \
    --weights-copy "$weights" $train_args
status=$?
echo "elmo train exited with $status"
# The checkpoint (weights and optimizer state: 360 MB for `small` with Adam and a 110,000-word
# vocabulary) only with TRAIN_BRING_CHECKPOINT=1: a call brings back 8 files of 16 MiB at most.
name=$(basename "$run_dir")
files="weights $name/metrics.jsonl $name/run.json $name/vocab.txt"
[ -n "${TRAIN_BRING_CHECKPOINT:-}" ] && files="$files $name/checkpoint.safetensors"
# shellcheck disable=SC2086
(cd "$(dirname "$run_dir")" && tar cf - $files 2>/dev/null) | split -b 15M - "$out/train.tar.part-"
ls -l "$out"
exit $status
