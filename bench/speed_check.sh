#!/usr/bin/env bash
# The speed check on a GPU machine, in one call: install (compiling the package's bytecode, as installing a
# wheel does), the GPU tests, a default and a full run with their JSON reports (the default run's
# quantities compared with the committed H200 measurement), the benchmark with every target met or
# MISSED and where the time goes, and the profiles of an in-process run (imports, cProfile).
#   bash bench/speed_check.sh OUT_DIR [REPEAT]
# Leaves 8 files in OUT_DIR: install.log pytest_gpu.txt report.json full.json bench.txt bench.json
# importtime.txt inline.prof. Takes about 3 minutes on an H200 host with REPEAT 9.
set -u
out=${1:?usage: bash bench/speed_check.sh OUT_DIR [REPEAT]}
repeat=${2:-9}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=python3

{ $py -m pip install --no-deps --no-build-isolation -e . && $py -m compileall -q bisect_smem; } > "$out/install.log" 2>&1 \
  && echo "installed, bytecode compiled" || echo "install FAILED (see install.log)"
CUDA_VISIBLE_DEVICES=0 timeout 300 $py -m pytest -m gpu -q -p no:cacheprovider > "$out/pytest_gpu.txt" 2>&1
echo "pytest -m gpu: $(tail -n 1 "$out/pytest_gpu.txt")"
$py -m bisect_smem --device 0 --quiet --json "$out/report.json" > /dev/null 2>&1; echo "default run exit $? (0 expected)"
$py -m bisect_smem --device 0 --quiet --level full --json "$out/full.json" > /dev/null 2>&1; echo "--level full exit $?"
$py - "$out/report.json" tests/data/h200_report.json <<'PY'
import json, sys
from bisect_smem.core.quantities import json_quantities
devices = [json.load(open(p))["devices"] for p in sys.argv[1:]]
if not all(devices):
    print(f"quantities: not compared (no device in {sys.argv[1]})")
    sys.exit(0)
now, then = (d[0] for d in devices)
if now["name"] != then["name"]:
    print(f"quantities: not compared ({now['name']} is not the {then['name']} of {sys.argv[2]})")
    sys.exit(0)
a, b = ({k: v for k, v in json_quantities(d).items() if k.startswith("measured.")} for d in (now, then))
differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
print(f"measured quantities equal to {sys.argv[2]}: {'yes' if not differ else 'NO'} ({len(a)} compared"
      + (f"; differ: {', '.join(differ[:8])})" if differ else ")"))
PY
timeout 420 $py bench/bench.py --repeat "$repeat" --out "$out/bench.json" > "$out/bench.txt" 2>&1
echo "bench exit $? (0: every target met, 1: one MISSED)"
cat "$out/bench.txt"
$py -X importtime -m bisect_smem --device 0 --inline --quiet --json /dev/null > /dev/null 2> "$out/importtime.txt"
# Through main() rather than `-m cProfile -m bisect_smem`: the tool leaves through os._exit, before cProfile writes.
$py -c 'import cProfile, sys; from bisect_smem.app.cli.main import main; cProfile.run("main(sys.argv[2:])", sys.argv[1])' \
  "$out/inline.prof" --device 0 --inline --quiet --json /dev/null > /dev/null 2>&1
echo "in-process profiles: importtime.txt ($(wc -l < "$out/importtime.txt") lines), inline.prof"
