#!/usr/bin/env bash
# Slurm HealthCheckProgram: drain this node when its GPUs' shared memory is not what they report, and
# resume it once they are again, if this script drained it.
#
#   slurm.conf:  HealthCheckProgram=/usr/local/sbin/bisect-smem-healthcheck
#                HealthCheckInterval=300
#
# slurmd runs it as root on every node, at start and every HealthCheckInterval, kills it after 60 s,
# and leaves any action to it. It reads the last report (written by the Prolog/Epilog, or by itself
# with BISECT_SMEM_MEASURE=1) with `bisect-smem check`, and on a problem (exit 1) drains the node:
#   scontrol update NodeName=<node> State=DRAIN Reason="bisect-smem: <the check line>"
# A stale, missing or unreadable report, or one that could not measure (exit 2), is logged and left
# alone unless BISECT_SMEM_ON_UNKNOWN=drain. When the report passes (exit 0) and the node is drained
# with a reason of its own ("bisect-smem: ..."), it resumes the node, as NHC resumes what NHC drained:
#   scontrol update NodeName=<node> State=RESUME
# A node drained for any other reason (an administrator's, NHC's, the Prolog's "bisect-smem prolog
# of job N: ...") is left as it is.
#
# The report is the node's: written here (BISECT_SMEM_MEASURE=1) or by a periodic measurement of every
# GPU, never by the Prolog or Epilog, which measure a job's GPUs into a report of the job's own.
#
# Settings (the environment, or /etc/default/bisect-smem, or the file named by BISECT_SMEM_CONF):
#   BISECT_SMEM_PYTHON    the Python that has bisect_smem installed (default: python3)
#   BISECT_SMEM_REPORT    the report to check (default: /var/lib/bisect-smem/report.json)
#   BISECT_SMEM_MAX_AGE   seconds after which the report is stale (default: none)
#   BISECT_SMEM_MEASURE   1: measure first (--level quick); only where no job uses the GPUs meanwhile
#   BISECT_SMEM_ARGS      extra arguments for that measurement (e.g. --device 0)
#   BISECT_SMEM_ON_UNKNOWN  ignore (default) or drain
set -uo pipefail
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # slurmd sets none
conf="${BISECT_SMEM_CONF:-/etc/default/bisect-smem}"
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
python="${BISECT_SMEM_PYTHON:-python3}"
report="${BISECT_SMEM_REPORT:-/var/lib/bisect-smem/report.json}"
node="${SLURMD_NODENAME:-$(hostname -s)}"

log() { logger -t bisect-smem -- "$*" 2>/dev/null || true; echo "bisect-smem: $*" >&2; }
drain() {
    log "draining $node: $1"
    scontrol update NodeName="$node" State=DRAIN Reason="bisect-smem: $1"
}
# Whether slurmctld has this node drained (or draining) by this script: its reason starts "bisect-smem: ".
drained_by_us() {
    local shown
    shown="$(scontrol show node "$node" 2>/dev/null)" || return 1
    [[ "$shown" =~ State=[A-Z_]*(\+[A-Z_]+)*\+DRAIN ]] && [[ "$shown" =~ Reason=bisect-smem:\  ]]
}
resume() {
    log "resuming $node, which it drained: $1"
    scontrol update NodeName="$node" State=RESUME
}

if [ "${BISECT_SMEM_MEASURE:-0}" = 1 ]; then
    mkdir -p "$(dirname "$report")"
    # The exit code is the check's to judge, from the report this writes (also on exit 3 and 4).
    # shellcheck disable=SC2086
    "$python" -m bisect_smem --quiet --level quick --json "$report" ${BISECT_SMEM_ARGS:-} >/dev/null
fi
line="$("$python" -m bisect_smem check ${BISECT_SMEM_MAX_AGE:+--max-age "$BISECT_SMEM_MAX_AGE"} "$report")"
code=$?
case "$code" in
    0) if drained_by_us; then resume "$line"; fi ;;
    1) drain "$line" ;;
    *) log "not judged (check exit $code): $line"
       if [ "${BISECT_SMEM_ON_UNKNOWN:-ignore}" = drain ]; then drain "$line"; fi ;;
esac
exit 0
