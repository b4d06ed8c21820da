#!/usr/bin/env bash
# The H200 cases of bisect-smem trace, each traced, with the explanation against the GPU's measured limits and
# against sm_120 (--arch 12.0). Usage: bash bench/trace_cases.sh OUT [CUTLASS_DIR]
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
say "measure the H200 once (the limits every case is explained against)"
limits=(--report "$work/h200.json")
$py -m bisect_smem --json "$work/h200.json" >>"$log" 2>&1 || { say "measurement failed: rc $?"; limits=(--no-measure); }

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
wait $build
tail -5 "$work/cutlass_build.log" | tee -a "$log"
[ -x "$bin/cutlass_gemm" ] && trace_case cutlass_gemm "$bin/cutlass_gemm"
say "fit for that build: $($py -m bisect_smem fit --tile 128x256x64 --dtype bf16 --stages 5 --schedule cooperative --arch 9.0 --no-local 2>&1 | head -3)"
say "overhead"
$py "$here/../trace_overhead.py" --launches 100000 --repeats 2 2>&1 | tee "$out/overhead.txt" >>"$log"
tar -czf "$out/traces.tgz" -C "$work" --exclude=bin . 2>>"$log"
rm -rf "$work"
