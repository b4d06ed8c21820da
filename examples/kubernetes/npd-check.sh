#!/bin/sh
# node-problem-detector's custom plugin for bisect-smem, run in NPD's own
# container, which has no Python: it prints the check line that the DaemonSet
# (daemonset.yaml) wrote after its last measurement with `bisect-smem check`,
# read from the host through a hostPath mount of /var/lib/bisect-smem, and
# exits with check's code (0 ok, 1 a problem, 2 unknown), NPD's contract.
# A line older than BISECT_SMEM_MAX_AGE_MIN minutes (default 180: the
# DaemonSet measures hourly) or missing is unknown: the DaemonSet stopped.
check=${BISECT_SMEM_CHECK:-/var/lib/bisect-smem/check}
max_age_min=${BISECT_SMEM_MAX_AGE_MIN:-180}
if [ ! -f "$check" ]; then
  echo "smem UNKNOWN: no check line at $check"
  exit 2
fi
if [ -z "$(find "$check" -mmin "-$max_age_min")" ]; then
  echo "smem STALE: $check older than $max_age_min min"
  exit 2
fi
line=$(sed -n 1p "$check")
code=$(sed -n 2p "$check")
echo "$line"
case "$code" in
  0 | 1) exit "$code" ;;
  *) exit 2 ;;
esac
