#!/usr/bin/env bash
# The cases of bisect-smem trace on this GPU (written for the H200; any cc 9.0 GPU runs them), each traced, with
# the explanation against the GPU's measured limits and against sm_120 (--arch 12.0).
# Usage: bash bench/trace_cases.sh OUT [CUTLASS_DIR]
# Optional: WHEELS12=DIR of cuda-bindings 12.x and nvidia-cuda-cupti-cu12 wheels (the CUDA 12 stack case).
# The wheel's prebuilt collector on a PATH without cc: bench/wheel_trace_check.sh.
# Writes OUT/cases.log (everything a person reads), OUT/overhead.txt and OUT/traces.tgz (every JSON line and
# summary). Needs a GPU, nvcc, CuPy, PyTorch and Triton; CUTLASS_DIR (default .cutlass) holds CUTLASS's
# include/ and tools/util/include/.
set -u
out=${1:?usage: trace_cases.sh OUT [CUTLASS_DIR]}
cutlass=${2:-.cutlass}
py=${PYTHON:-python3}
work=$(mktemp -d)
bin=$work/bin  # the programs, apart from the trace folders named after the cases
mkdir -p "$out" "$bin"
log="$out/cases.log"
: >"$log"
say() { echo "== $*" | tee -a "$log"; }

say "tools: $(cc --version | head -1); $(nvcc --version | tail -1); $($py -c 'import torch, triton, cupy; print("torch", torch.__version__, "triton", triton.__version__, "cupy", cupy.__version__)' 2>&1)"
say "measure this GPU once (the limits every case is explained against): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
limits=(--report "$work/limits.json")
$py -m bisect_smem --json "$work/limits.json" >>"$log" 2>&1 || { say "measurement failed: rc $?"; limits=(--no-measure); }

trace_case() {  # NAME COMMAND...: traced, then explained again against sm_120
    local name=$1; shift
    say "case $name: $*"
    $py -m bisect_smem trace "${limits[@]}" --out "$work/$name" --json "$work/$name.summary.json" \
        -- "$@" >>"$log" 2>&1
    say "case $name: exit $?"
    $py -m bisect_smem trace --from "$work/$name" "${limits[@]}" --arch 12.0 >>"$log" 2>&1
    say "case $name --arch 12.0: exit $?"
}

here=$(cd "$(dirname "$0")" && pwd)/trace_cases
nvcc -std=c++17 -arch=sm_90 -o "$bin/runtime_over" "$here/runtime_over.cu" >>"$log" 2>&1 || say "nvcc runtime_over failed"
( start=$(date +%s)
  nvcc -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -O2 -I "$cutlass/include" -I "$cutlass/tools/util/include" \
      -o "$bin/cutlass_gemm" "$here/cutlass_gemm.cu" >"$work/cutlass_build.log" 2>&1
  echo "cutlass build: exit $? in $(( $(date +%s) - start )) s" >>"$work/cutlass_build.log" ) &
build=$!

trace_case cupy_over $py "$here/cupy_over.py"
trace_case runtime_over "$bin/runtime_over"
trace_case sdpa $py "$here/torch_cases.py" sdpa
trace_case graph_replay $py "$here/torch_cases.py" graph_replay  # its kernels counted 1000 times, per replay
trace_case triton_matmul $py "$here/torch_cases.py" matmul
trace_case multiprocessing_child $py "$here/cupy_over.py" child
trace_case under_ceiling $py "$here/cupy_over.py" under_ceiling

say "case sigterm_server: SIGTERM to trace while the traced command launches in a loop"
$py -m bisect_smem trace "${limits[@]}" --out "$work/sigterm_server" --json "$work/sigterm_server.summary.json" \
    -- $py "$here/cupy_over.py" server "$work/server_count.txt" >>"$log" 2>&1 &
tracer=$!
for _ in $(seq 100); do [ -s "$work/server_count.txt" ] && break; sleep 0.2; done
sleep 2; kill -TERM "$tracer"; wait "$tracer"
say "case sigterm_server: exit $? (143 expected); the server counted $(cat "$work/server_count.txt" 2>/dev/null) launches"
$py - "$work/sigterm_server.summary.json" >>"$log" 2>&1 <<'PY' || say "no summary"
import json, sys
doc = json.load(open(sys.argv[1]))
print("== traced counts of the server's launches:", [r.get("count") for r in doc.get("requests", [])
      if r.get("requested_bytes") == 4096])
PY
sleep 1; say "processes left after SIGTERM: $(pgrep -fc 'cupy_over.py server' || true)"

if [ -n "${WHEELS12:-}" ] && [ -d "$WHEELS12" ]; then
  say "case cuda12: cuda-bindings 12 and libcupti 12 on this driver"
  $py -m pip install -q --no-index --no-deps --no-compile --target "$work/site12" "$WHEELS12"/*.whl >>"$log" 2>&1
  nvcc -cubin -arch=sm_90 -o "$bin/fill.cubin" "$here/fill.cu" >>"$log" 2>&1
  cupti12=$(ls "$work"/site12/nvidia/cuda_cupti/lib/libcupti.so.12* 2>/dev/null | head -1)
  PYTHONPATH="$work/site12" BISECT_SMEM_CUPTI_LIBRARY="$cupti12" trace_case cuda12 $py "$here/cuda12_driver.py" "$bin/fill.cubin"
  PYTHONPATH="$work/site12" trace_case cuda12_default_cupti $py "$here/cuda12_driver.py" "$bin/fill.cubin"
fi

wait $build
tail -5 "$work/cutlass_build.log" | tee -a "$log"
[ -x "$bin/cutlass_gemm" ] && trace_case cutlass_gemm "$bin/cutlass_gemm"
say "fit for that build: $($py -m bisect_smem fit --tile 128x256x64 --dtype bf16 --stages 5 --schedule cooperative --arch 9.0 --no-local 2>&1 | head -3)"
say "overhead"
$py "$here/../trace_overhead.py" --launches 100000 --repeats 2 2>&1 | tee "$out/overhead.txt" >>"$log"
mkdir -p "$out/summaries" && cp "$work"/*.summary.json "$out/summaries/" 2>>"$log"
tar -czf "$out/traces.tgz" -C "$work" --exclude=bin . 2>>"$log"
rm -rf "$work"
