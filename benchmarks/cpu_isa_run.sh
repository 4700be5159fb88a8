#!/usr/bin/env bash
# CPU speed on one host, in one sitting, as the host runs and as an AVX2-only CPU would: what the
# CPU has, the int8 kernel tests, then `embed_speed.py` (fp32 and int8) natively, with the no-VNNI
# int8 kernel forced, and with oneDNN, ATen and fbgemm held to AVX2 (ONEDNN_MAX_CPU_ISA,
# ATEN_CPU_CAPABILITY, FBGEMM_ENABLE_INSTRUCTIONS), and a profile of fp32. Made for a lent GPU
# machine's CPU (AVX-512, often VNNI), where this machine's AVX2 cannot show those targets.
# Leaves cpu_*.json and cpu_isa_run.log under OUT_DIR.
#
#   benchmarks/gpu_data.sh .gpu-data                       # here, once: the workloads it reads
#   benchmarks/cpu_isa_run.sh OUT_DIR [SHARED_DIR]         # SHARED_DIR holds bench/ (.gpu-data)
#
# CPU_THREADS (default 2) and CPU_PRESETS (default "small original") set the runs' size;
# PYTHON names the interpreter (default python3).
set -uo pipefail
out=${1:?usage: cpu_isa_run.sh OUT_DIR [SHARED_DIR]}
shared=${2:-.gpu-data}
python=${PYTHON:-python3}
threads=${CPU_THREADS:-2}
read -r -a presets <<< "${CPU_PRESETS:-small original}"
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$here/src:$here/benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export ELMO_SHARED=$shared CUDA_VISIBLE_DEVICES=""  # the CPU's speed: elmo would take a GPU
avx2=(env ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2)
mkdir -p "$out"
exec > >(tee "$out/cpu_isa_run.log") 2>&1

echo "== the CPU"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket)' || true
echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_vnni|avx_vnni|avx512_bf16|amx_int8|amx_bf16' \
    /proc/cpuinfo | sort -u | tr '\n' ' ')"
kernel='import torch; from elmo.modules import quantize as q
print("torch", torch.__version__, "capability", torch.backends.cpu.get_cpu_capability(),
      "vnni", torch.cpu._is_vnni_supported(), "int8 kernel", q.choose_int8_kernel().name)'
"$python" -c "$kernel"
"${avx2[@]}" "$python" -c "$kernel"

echo "== the int8 kernel tests: natively, then held to AVX2"
for run in "" "${avx2[*]}"; do
    (cd "$here" && $run timeout 300 "$python" -m pytest -q -p no:cacheprovider \
        tests/test_quantize.py tests/test_lstm_backends.py --tb=short 2>&1 | tail -40)
done

speed=("$python" "$here/benchmarks/embed_speed.py" --presets "${presets[@]}" --threads "$threads")
echo "== embed_speed natively (the int8 kernel elmo chooses)"
"${speed[@]}" --out "$out/cpu_native.json"
echo "== embed_speed held to AVX2"
"${avx2[@]}" "${speed[@]}" --workloads sentences_256.txt --out "$out/cpu_avx2.json"
echo "== embed_speed with the no-VNNI int8 kernel forced"
ELMO_INT8_KERNEL=fbgemm-no-vnni "${speed[@]}" --workloads sentences_256.txt \
    --out "$out/cpu_fbgemm_no_vnni.json"
echo "== the fp32 profile"
"${speed[@]}" --workloads sentences_256.txt --modes fp32 --profile --out "$out/cpu_profile.json"
