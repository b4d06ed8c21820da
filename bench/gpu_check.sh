#!/usr/bin/env bash
# The whole check on a GPU machine, in one go: install, the GPU tests, the runs a person would make, the
# fit example, a signal, a baseline twice, the benchmark, the trace cases and, with two or more GPUs, one
# against all. With BEFORE_DIR (reports standard.json, full.json and all.json that an earlier version of
# the tool wrote on this GPU), each run is compared with it quantity for quantity and row for row.
#   bash bench/gpu_check.sh OUT_DIR [REPEAT] [BEFORE_DIR] [CUTLASS_DIR]
# Every log lands in OUT_DIR; the last lines printed are the summary.
set -u
out=${1:?usage: bash bench/gpu_check.sh OUT_DIR [REPEAT] [BEFORE_DIR] [CUTLASS_DIR]}
repeat=${2:-3}
before=${3:-}
cutlass=${4:-.cutlass}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 || echo "install FAILED"
nvidia-smi -L | tee "$out/gpus.txt"
gpus=$(grep -c '^GPU ' "$out/gpus.txt")
run() { python3 -m bisect_smem "$@"; }

CUDA_VISIBLE_DEVICES=0 python3 -m pytest -m gpu -q -p no:cacheprovider -s > "$out/pytest_gpu.txt" 2>&1
echo "pytest -m gpu: $(tail -n 1 "$out/pytest_gpu.txt")"
grep -h "cross-process" "$out/pytest_gpu.txt"
run --device 0 --quiet --json "$out/h200_report.json" > "$out/run.txt" 2>&1; echo "default run exit $?"
run --device 0 --quiet --strict > /dev/null 2>&1; echo "--strict exit $?"
run --device 0 --quiet --format markdown > "$out/run.md" 2>&1; echo "--format markdown exit $?"
run --device 0 --quiet --level full --json "$out/full.json" > "$out/full.txt" 2>&1; echo "--level full exit $?"
run --device 0 --quiet --level quick > "$out/quick.txt" 2>&1; echo "--level quick exit $?"
run --device 0 --quiet --backend all --json "$out/all.json" > "$out/all.txt" 2>&1; echo "--backend all exit $?"
if [ -n "$before" ]; then
  for name in standard:h200_report full:full all:all; do
    python3 bench/compare_reports.py "$before/${name%%:*}.json" "$out/${name#*:}.json" > "$out/compare_${name%%:*}.txt" 2>&1
    echo "before/after ${name%%:*}: $(tail -n 1 "$out/compare_${name%%:*}.txt")"
  done
fi
run fit --tile 128x256x64 --dtype bf16 --stages auto --arch 9.0 --quiet > "$out/fit.txt" 2>&1; echo "fit exit $?"
echo "widest line $(awk '{print length}' "$out/run.txt" | sort -n | tail -n 1), lines $(wc -l < "$out/run.txt")"

run --device 0 --probe-timeout 10 > /dev/null 2> "$out/sigterm.txt" & pid=$!
sleep 1; kill -TERM "$pid"; wait "$pid"; echo "SIGTERM exit $? ($(head -c 120 "$out/sigterm.txt"))"
sleep 1; echo "processes left: $(pgrep -fc 'bisect_smem' || true)"
rm -rf "$out/baselines"
run --device 0 --quiet --save-baseline "$out/baselines" > /dev/null 2>&1; echo "save-baseline exit $?"
run --device 0 --quiet --save-baseline "$out/baselines" > /dev/null 2> "$out/baseline2.txt"
echo "save-baseline again exit $? ($(head -c 120 "$out/baseline2.txt"))"
run --device 0 --quiet --compare "$out/baselines" > "$out/compare.txt" 2>&1; echo "compare exit $?"

if [ -d "$cutlass/include" ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 300 bash bench/trace_cases.sh "$out/trace" "$cutlass" > /dev/null 2>&1
  echo "trace cases exit $?"; grep -h "^== case\|over by\|added by trace" "$out/trace/cases.log" | head -40
fi

CUDA_VISIBLE_DEVICES=0 timeout 420 python3 bench/bench.py --repeat "$repeat" --out "$out/bench.json" > "$out/bench.txt" 2>&1
sed -n '/^target/,$p' "$out/bench.txt"
grep -h "probe latency\|device open\|first run" "$out/bench.txt"
if [ "$gpus" -ge 2 ]; then
  run --quiet --json "$out/all_devices.json" > "$out/all_devices.txt" 2>&1; echo "every device exit $?"
  for which in one all; do
    for i in $(seq "$repeat"); do
      args=(--quiet); [ "$which" = one ] && args+=(--device 0)
      start=$(date +%s.%N); python3 -m bisect_smem "${args[@]}" > /dev/null 2>&1
      python3 -c "print(round($(date +%s.%N) - $start, 3))" >> "$out/scaling_$which.txt"
    done
  done
  echo "warm, seconds: one GPU $(sort -n "$out/scaling_one.txt" | xargs); all $gpus GPUs $(sort -n "$out/scaling_all.txt" | xargs)"
fi
