#!/usr/bin/env bash
# Slurm Prolog and Epilog: measure the job's GPUs (--level quick) before the job starts and after it
# ends, and fail (so that Slurm drains the node) when their shared memory is not what they report.
#
#   slurm.conf:  Prolog=/etc/slurm/prolog.d/bisect-smem.sh
#                Epilog=/etc/slurm/epilog.d/bisect-smem.sh      (the same script; epilog.sh links to it)
#
# A failing Prolog drains the node and requeues the job (held, unless SchedulerParameters has
# nohold_on_prolog_fail); a failing Epilog drains the node. Before failing, the script drains the node
# itself with Reason="bisect-smem prolog of job N: <the check line>" (or epilog), so the reason says
# what was found and where. healthcheck.sh resumes only its own drains ("bisect-smem: ..."): a drain
# from a job's hook stays until someone has looked.
#
# Each measurement is the job's: it is written to BISECT_SMEM_JOB_REPORTS/<job>.<prolog|epilog>.json
# (default /var/lib/bisect-smem/jobs), never to the node's report, which covers every GPU of the node
# and which the health check, NHC, NPD and the exports read. When the Epilog passes, the job's two
# reports are removed; a failed or incomplete one stays for whoever looks into the drain. A requeued job
# keeps its id: a report an earlier attempt left is first moved aside to <job>.<hook>.<its time>.json, so
# that an attempt whose measurement wrote nothing is never judged by the last attempt's report. A hook run
# without SLURM_JOB_ID writes nojob.<time>.<pid>.<hook>.json, one of its own.
#
# Exit codes of the measurement, and what the script does:
#   0  the job runs (Epilog: the node stays up)
#   1  a mismatch: drain, fail
#   3  no usable GPU (a CPU-only node, a job without GPUs): log a line and pass, so that no unrelated
#      node is drained
#   4  a measurement could not be completed: BISECT_SMEM_ON_INCOMPLETE=pass (default: log and pass) or
#      fail (drain and fail, as 1)
#   else (2: bad usage or an unwritable report; 128+N: killed): log and fail, so that a broken
#      installation is seen at once
#
# Only the job's GPUs are measured: CUDA_VISIBLE_DEVICES as Slurm sets it for the job's GPUs, else
# SLURM_JOB_GPUS, numbered by PCI bus id as Slurm and NVML number them. A job without either gets no
# measurement (log and pass) unless BISECT_SMEM_ALL_GPUS=1.
#
# Settings (the environment, or /etc/default/bisect-smem, or the file named by BISECT_SMEM_CONF):
#   BISECT_SMEM_PYTHON, BISECT_SMEM_ARGS as for healthcheck.sh; BISECT_SMEM_JOB_REPORTS (a folder);
#   BISECT_SMEM_ON_INCOMPLETE (pass|fail), BISECT_SMEM_ALL_GPUS (0|1)
set -uo pipefail
export PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # slurmd sets none
conf="${BISECT_SMEM_CONF:-/etc/default/bisect-smem}"
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
python="${BISECT_SMEM_PYTHON:-python3}"
jobs="${BISECT_SMEM_JOB_REPORTS:-/var/lib/bisect-smem/jobs}"
node="${SLURMD_NODENAME:-$(hostname -s)}"
case "${SLURM_SCRIPT_CONTEXT:-$(basename "$0")}" in
    *epilog*) hook=epilog ;;
    *) hook=prolog ;;
esac
job="${SLURM_JOB_ID:-nojob.$(date -u +%Y%m%dT%H%M%SZ).$$}"
report="$jobs/$job.$hook.json"

log() { logger -t bisect-smem -- "$*" 2>/dev/null || true; echo "bisect-smem: $*" >&2; }
fail() {
    log "$hook of job $job: draining $node: $1"
    scontrol update NodeName="$node" State=DRAIN Reason="bisect-smem $hook of job $job: $1" || true
    exit 1
}

if [ -z "${CUDA_VISIBLE_DEVICES:-}" ]; then
    if [ -n "${SLURM_JOB_GPUS:-}" ]; then
        export CUDA_VISIBLE_DEVICES="$SLURM_JOB_GPUS"
    elif [ "${BISECT_SMEM_ALL_GPUS:-0}" != 1 ]; then
        log "$hook of job $job: the job has no GPUs; nothing to check"
        exit 0
    fi
fi
export CUDA_DEVICE_ORDER="${CUDA_DEVICE_ORDER:-PCI_BUS_ID}"

mkdir -p "$jobs" || fail "cannot create $jobs"
if [ -e "$report" ]; then
    earlier="$jobs/$job.$hook.$(date -u -r "$report" +%Y%m%dT%H%M%SZ).json"
    mv -f "$report" "$earlier" || fail "cannot move an earlier attempt's $report aside"
    log "$hook of job $job: an earlier attempt's report is kept as $earlier"
fi
# shellcheck disable=SC2086
"$python" -m bisect_smem --quiet --level quick --json "$report" ${BISECT_SMEM_ARGS:-} >/dev/null
code=$?
line="$("$python" -m bisect_smem check "$report")"
case "$code" in
    0) if [ "$hook" = epilog ]; then rm -f "$jobs/$job.prolog.json" "$report"; fi
       exit 0 ;;
    1) fail "$line" ;;
    3) log "$hook of job $job: no usable GPU, passing: $line"; exit 0 ;;
    4) if [ "${BISECT_SMEM_ON_INCOMPLETE:-pass}" = fail ]; then fail "$line"; fi
       log "$hook of job $job: measurement incomplete, passing: $line"; exit 0 ;;
    *) log "$hook of job $job: bisect-smem exited $code: $line"; exit 1 ;;
esac
