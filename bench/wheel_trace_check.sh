#!/usr/bin/env bash
# The wheel's prebuilt collector on a GPU node with no C compiler on PATH. Installs WHEEL (built elsewhere by
# `make wheel-x86_64`: this node needs no package index and no zig) into a fresh virtual environment that also
# sees this machine's packages (CuPy, libcupti), builds bench/trace_cases/runtime_over.cu with nvcc, then
# traces it through /bin/sh with PATH holding the environment's bin folder alone: no cc, gcc or clang.
# Usage: bash bench/wheel_trace_check.sh WHEEL OUT. Writes OUT/wheel.log; the trace stays in OUT/trace.
set -u
usage="usage: wheel_trace_check.sh WHEEL OUT"
wheel=${1:?$usage}
out=${2:?$usage}
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out"
log="$out/wheel.log"
: >"$log"
say() { echo "== $*" | tee -a "$log"; }

say "wheel: $(basename "$wheel"); host glibc: $(getconf GNU_LIBC_VERSION)"
$py -m venv --system-site-packages --without-pip "$work/venv" >>"$log" 2>&1 || { say "venv failed"; exit 1; }
# --ignore-installed: a bisect-smem the system packages hold must not stand in for the wheel.
$py -m pip --python "$work/venv/bin/python" install --quiet --no-deps --no-index --ignore-installed "$wheel" \
    >>"$log" 2>&1 || { say "pip install of the wheel failed"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
nvcc -std=c++17 -o "$work/runtime_over" "$here/trace_cases/runtime_over.cu" >>"$log" 2>&1 || { say "nvcc failed"; exit 1; }

bare="$work/venv/bin"
for name in cc gcc clang; do
    PATH=$bare command -v "$name" >/dev/null && { say "$name is on $bare: not a node without a compiler"; exit 1; }
done
say "trace -- /bin/sh -c 'runtime_over' with PATH=$bare"
# shellcheck disable=SC2016  # expanded by the traced shell, not this one
PATH=$bare "$bare/bisect-smem" trace --out "$out/trace" -- /bin/sh -c \
    'echo "collector: $CUDA_INJECTION64_PATH"; exec "$0"' "$work/runtime_over" >>"$log" 2>&1
say "exit $? (0 expected: runtime_over's own; 3 would mean no collector)"
if grep -q "^collector: $work/venv/.*/prebuilt/$(uname -m)/collector-" "$log"; then
    say "the collector came from the wheel"
else
    say "the collector did NOT come from the wheel"
fi
rm -rf "$work"
