#!/usr/bin/env bash
# On a GPU machine, from the checkout: the fleet formats on a real measurement (--prom, --nfd, check,
# export prom), then one run from a driver-only environment: every /usr/local/cuda* folder hidden by a
# private tmpfs, CUDA_HOME/CUDA_PATH/LD_LIBRARY_PATH unset, fresh kernel caches, so NVRTC must come from
# the Python environment's wheels; /proc/self/maps and cuda-pathfinder say which libnvrtc was loaded.
#   bash bench/fleet_check.sh OUT_DIR
# OUT_DIR gets seven files: report.json smem.prom features.txt check.txt driver_only.json
# driver_only_report.json summary.txt (what this prints).
set -u
out=${1:?usage: bash bench/fleet_check.sh OUT_DIR}
mkdir -p "$out"
py=${BISECT_SMEM_PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
"$py" -m bisect_smem --device 0 --quiet --json "$out/report.json" --prom "$out/smem.prom" --nfd "$out/features.txt"
echo "measure exit $?"
"$py" -m bisect_smem check "$out/report.json" > "$out/check.txt"; echo "check exit $?: $(cat "$out/check.txt")"
"$py" -m bisect_smem export prom "$out/report.json" | cmp -s - "$out/smem.prom" && echo "export prom: the same text as --prom"
"$py" - "$out/smem.prom" <<'EOF'
import collections, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
families = list(text_string_to_metric_families(text))
helps = collections.Counter(l.split()[2] for l in text.splitlines() if l.startswith("# HELP "))
print(f"prometheus_client: {len(families)} families, HELP once each: {set(helps.values()) == {1}}")
EOF
grep -E '^bisect_smem_(device_ok|optin_dynamic_ceiling_bytes|default_dynamic_ceiling_bytes|smem_per_sm_bytes|reserved_bytes|allocation_granularity_bytes)[{ ]' "$out/smem.prom"
grep -v '^#' "$out/features.txt"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('result', d['result'], 'exit_code', d['exit_code'], 'summaries', [x['summary'] for x in d['devices']])" "$out/report.json"

echo "--- driver-only: the toolkit hidden"
folders=$(for d in /usr/local/cuda*; do [ -d "$d" ] && realpath "$d"; done | sort -u | tr '\n' ' ')
echo "hidden: ${folders:-none}"
cache=$(mktemp -d)
cat > "$cache/run.py" <<'EOF'
import contextlib, io, sys
from bisect_smem.app.cli import main as cli
from bisect_smem.app.run.nvrtc_origin import mapped_nvrtc
with contextlib.redirect_stdout(io.StringIO()):
    code = cli.main(["--device", "0", "--inline", "--quiet", "--level", "quick", "--json", sys.argv[1]])
print("driver-only run exit", code, "; libnvrtc mapped by the measuring process:", mapped_nvrtc())
EOF
# shellcheck disable=SC2016
unshare -m sh -c 'for d in $1; do mount -t tmpfs none "$d"; done; shift; exec "$@"' sh "$folders" \
  env -u CUDA_HOME -u CUDA_PATH -u LD_LIBRARY_PATH BISECT_SMEM_CACHE_DIR="$cache/smem" CUPY_CACHE_DIR="$cache/cupy" \
  sh -c 'echo "files left in /usr/local/cuda: $(ls /usr/local/cuda/ 2>/dev/null | wc -l)"
         "$0" -m bisect_smem.app.run.nvrtc_origin sm_90 > "$1/driver_only.json"; echo "nvrtc_origin exit $?"
         "$0" "$2/run.py" "$1/driver_only_report.json"
         "$0" -m bisect_smem check "$1/driver_only_report.json"' "$py" "$out" "$cache"
echo "check of the driver-only report exit $?"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in ('found_via', 'abs_path', 'mapped', 'nvrtc_version', 'compiled', 'cubin_bytes', 'environment')})" "$out/driver_only.json"
rm -rf "$cache"
} 2>&1 | tee "$out/summary.txt"
