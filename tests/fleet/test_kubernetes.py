"""The Kubernetes manifests, read by PyYAML: the fields that matter (the features.d hostPath, the exit
codes of podFailurePolicy, the termination message, the commands, which the tool's own parser must
accept); and each container's script run here over simulated devices, as the pod would run it."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bisect_smem.app.cli import main as cli
from bisect_smem.core.errors import ExitCode
from tests.fleet.test_nfd import NAME, VALUE, parse
from tests.paths import ROOT

K8S = ROOT / "examples" / "kubernetes"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"


def manifest(name: str) -> dict:
    """The first document of examples/kubernetes/NAME (the workload; a ConfigMap of its scripts may follow)."""
    return next(iter(yaml.safe_load_all((K8S / name).read_text())))


def scripts() -> dict[str, str]:
    """The scripts of the DaemonSet's ConfigMap, by name."""
    (config_map,) = [d for d in yaml.safe_load_all((K8S / "daemonset.yaml").read_text()) if d["kind"] == "ConfigMap"]
    return config_map["data"]


def _container(doc: dict) -> dict:
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return container


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


def _invocations(script: str, env: dict[str, str]) -> list[list[str]]:
    """Every bisect-smem command line of the script, with the container's variables filled in."""
    joined = re.sub(r"\\\n\s*", "", script)  # continued lines as one
    lines = [line.strip().lstrip("{ ") for line in joined.splitlines()]
    lines = [line.split(";")[0] for line in lines if line.startswith("bisect-smem ")]
    return [shlex.split(re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), line.split(">")[0]))[1:]
            for line in lines]


def test_the_daemonset_writes_the_feature_file_through_the_features_d_host_path() -> None:
    doc = manifest("daemonset.yaml")
    assert doc["apiVersion"] == "apps/v1" and doc["kind"] == "DaemonSet"
    spec = doc["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in _container(doc)["volumeMounts"]}
    assert volumes["features-d"]["hostPath"] == {"path": FEATURES_D, "type": "DirectoryOrCreate"}
    assert mounts["features-d"] == FEATURES_D
    assert all(name in volumes and {"hostPath", "configMap"} & set(volumes[name]) for name in mounts)
    container = _container(doc)
    measure, check = _invocations(container["args"][0], _env(container))
    assert cli.build_parser().parse_args(check).command == "check"
    args = cli.build_parser().parse_args(measure)
    assert args.command is None and args.level == "quick"
    assert Path(args.nfd).parent == Path(FEATURES_D) and not Path(args.nfd).name.startswith(".")
    assert any(Path(args.json).is_relative_to(path) for path in mounts.values())
    assert any(Path(args.prom).parent == Path(path) for path in mounts.values())
    assert args.nfd_expiry > float(_env(container)["INTERVAL_S"])  # labels outlive one interval
    for key, value in doc["metadata"]["labels"].items():
        assert NAME.match(key.split("/")[-1]) and VALUE.match(value)


def test_the_job_tells_a_mismatch_from_no_gpu_by_exit_code() -> None:
    doc = manifest("job.yaml")
    assert doc["apiVersion"] == "batch/v1" and doc["kind"] == "Job"
    pod = doc["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy needs it
    container = _container(doc)
    actions = {}
    for rule in doc["spec"]["podFailurePolicy"]["rules"]:
        if "onExitCodes" in rule:
            assert rule["onExitCodes"]["containerName"] == container["name"]
            assert rule["onExitCodes"]["operator"] == "In"
            actions.update(dict.fromkeys(rule["onExitCodes"]["values"], rule["action"]))
    assert actions == {ExitCode.MISMATCH: "FailJob", ExitCode.USAGE: "FailJob", ExitCode.NO_GPU: "Count",
                       ExitCode.INCOMPLETE: "Count"}
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert _env(container)["TERMINATION_LOG"] == container["terminationMessagePath"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    measure, check = _invocations(container["args"][0], _env(container))
    assert cli.build_parser().parse_args(measure).json == _env(container)["REPORT"]
    assert cli.build_parser().parse_args(check).command == "check"


def _shim(tmp_path: Path, spec: str, measuring: str | None = None) -> dict[str, str]:
    """A `bisect-smem` on PATH that measures simulated devices (or runs ``measuring`` instead): the pod's
    environment, here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "bisect-smem"
    measure = measuring or f'exec "{sys.executable}" -m bisect_smem "$@" --simulate "{spec}"'
    shim.write_text(f'#!/bin/sh\nif [ "$1" = check ]; then exec "{sys.executable}" -m bisect_smem "$@"; fi\n'
                    f'{measure}\n')
    shim.chmod(0o755)
    for name, text in scripts().items():  # what the ConfigMap mounts in /usr/local/bin
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("spec, code", [("h200,optin=204800", 1), ("h200", 0)], ids=["mismatch", "healthy"])
def test_the_jobs_script_writes_the_check_line_to_the_termination_log(spec: str, code: int,
                                                                      tmp_path: Path) -> None:
    container = _container(manifest("job.yaml"))
    env = {**_env(container), **_shim(tmp_path, spec), "REPORT": str(tmp_path / "r.json"),
           "TERMINATION_LOG": str(tmp_path / "termination-log")}
    done = subprocess.run([*container["command"], container["args"][0]], env=env, capture_output=True, timeout=60)
    message = (tmp_path / "termination-log").read_bytes()
    assert done.returncode == code, done.stderr
    assert len(message) <= 4096 and message.count(b"\n") == 1
    assert message.startswith(b"smem MISMATCH SIM-sm_90-0 opt-in 204800 B" if code else b"smem ok: 1 GPU")


def test_the_daemonsets_loop_labels_the_node(tmp_path: Path) -> None:
    container = _container(manifest("daemonset.yaml"))
    features, state, textfile = tmp_path / "features.d", tmp_path / "state", tmp_path / "textfile"
    for folder in (features, state, textfile):
        folder.mkdir()
    env = {**_env(container), **_shim(tmp_path, "h200"), "REPORT": str(state / "report.json"),
           "CHECK": str(state / "check"), "FEATURES_DIR": str(features), "TEXTFILE_DIR": str(textfile),
           "INTERVAL_S": "600"}
    pod = subprocess.Popen([*container["command"], container["args"][0]], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (features / "bisect-smem").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        _, labels = parse((features / "bisect-smem").read_text())
        assert labels["verdict"] == "pass" and labels["smem.optin-bytes"] == "232448"
        assert (textfile / "bisect-smem.prom").exists() and (state / "report.json").exists()
        deadline = time.monotonic() + 30
        while not (state / "check").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (state / "check").read_text() == "smem ok: 1 GPU, opt-in 232448 B\n0\n"  # the line NPD reads
        assert [p.name for p in features.iterdir()] == ["bisect-smem"]  # no dot file left for NFD to skip
    finally:
        os.killpg(pod.pid, signal.SIGTERM)
        pod.wait(timeout=10)


def test_the_daemonsets_loop_never_restamps_a_stale_ok(tmp_path: Path) -> None:
    # A round whose measurement fails before writing leaves last time's passing report: the check line the
    # problem detector reads must turn STALE, not say ok again.
    container = _container(manifest("daemonset.yaml"))
    state = tmp_path / "state"
    state.mkdir()
    report = state / "report.json"
    report.write_bytes((ROOT / "tests" / "data" / "h200_report.json").read_bytes())  # passing, measured long ago
    env = {**_env(container), **_shim(tmp_path, "h200", measuring="echo 'error: no usable GPU' >&2; exit 3"),
           "REPORT": str(report), "CHECK": str(state / "check"), "FEATURES_DIR": str(tmp_path),
           "TEXTFILE_DIR": str(tmp_path), "INTERVAL_S": "600"}
    pod = subprocess.Popen([*container["command"], container["args"][0]], env=env, start_new_session=True,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (state / "check").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        line, code = (state / "check").read_text().splitlines()
        assert line.startswith("smem STALE: report ") and line.endswith(f"(max {env['MAX_AGE_S']} s)"), line
        assert code == "2"
    finally:
        os.killpg(pod.pid, signal.SIGTERM)
        pod.wait(timeout=10)
