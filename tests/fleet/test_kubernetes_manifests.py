"""The Kubernetes examples as the cluster and its tools read them: every manifest valid, in strict mode, for
every Kubernetes minor from 1.25 to the newest that kubernetes-validate knows (its schemas are the
cluster's OpenAPI, as kubeconform's); yamllint clean with its default rules; the DaemonSet privileged at the
node-critical priority that its namespace admits; the GPUs a process uses left alone; the NFD example
selecting only labels the DaemonSet writes; and node-problem-detector's plugin, run as NPD runs it, reading
the check line the DaemonSet left on the host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import consumer_tool
from tests.fleet.test_kubernetes import K8S, _env, scripts

kubernetes_validate = pytest.importorskip("kubernetes_validate.utils")
yamllint_config = pytest.importorskip("yamllint.config")
yamllint_linter = pytest.importorskip("yamllint.linter")

MANIFESTS = sorted(K8S.glob("*.yaml"))
OLDEST = (1, 25)
VERSIONS = sorted({v for v in kubernetes_validate.all_versions()
                   if tuple(int(x) for x in v.split(".")[:2]) >= OLDEST})


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _kind(kind: str) -> list[dict]:
    return [d for path in MANIFESTS for d in _documents(path) if d["kind"] == kind]


def test_every_minor_from_1_25_to_the_newest_known_is_checked() -> None:
    assert VERSIONS[0].startswith("1.25.") and len(VERSIONS) >= 13  # 1.25 .. 1.37 at least


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_strictly(version: str) -> None:
    for path in MANIFESTS:
        for document in _documents(path):
            # validate() raises ValidationError naming the field (an unknown one, in strict mode, too).
            kubernetes_validate.validate(document, version, strict=True)


def test_the_old_job_rule_without_status_is_refused() -> None:
    # The check can fail: a DisruptionTarget condition without its status, as job.yaml once had it.
    (job,) = _kind("Job")
    job["spec"]["podFailurePolicy"]["rules"][2]["onPodConditions"][0].pop("status")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.34.0", strict=True)


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_yamllint_finds_nothing(path: Path) -> None:
    problems = list(yamllint_linter.run(path.read_text(), yamllint_config.YamlLintConfig("extends: default")))
    assert problems == [], [f"{p.line}:{p.column} {p.message}" for p in problems]


def test_the_daemonset_is_privileged_at_node_critical_priority_in_a_namespace_that_admits_it() -> None:
    (daemonset,) = _kind("DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"] == {"privileged": True} and pod["priorityClassName"] == "system-node-critical"
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})  # it holds no GPU from workloads
    (namespace,) = _kind("Namespace")
    assert daemonset["metadata"]["namespace"] == namespace["metadata"]["name"]
    (quota,) = _kind("ResourceQuota")
    assert quota["metadata"]["namespace"] == namespace["metadata"]["name"]
    (scope,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope["scopeName"] == "PriorityClass" and pod["priorityClassName"] in scope["values"]
    assert _env(container)["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # --device N is nvidia-smi's GPU N
    for workload in (*_kind("Job"), *_kind("DaemonSet")):
        spec = workload["spec"]["template"]["spec"]
        assert spec["runtimeClassName"] == "nvidia" and spec["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert workload["metadata"]["namespace"] == namespace["metadata"]["name"]


UUIDS = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(4)]


def _idle_gpus(tmp_path: Path, busy: list[int] | None) -> str:
    """What the ConfigMap's idle-gpus prints on a 4-GPU node where GPUs ``busy`` run a process (None: no
    nvidia-smi at all)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "idle-gpus"
    script.write_text(scripts()["idle-gpus"])
    script.chmod(0o755)
    smi = bin_dir / "nvidia-smi"
    if busy is None:
        smi.unlink(missing_ok=True)
    else:
        gpus = "".join(f"{i}, {u}\\n" for i, u in enumerate(UUIDS))
        apps = "".join(f"{UUIDS[i]}\\n" for i in busy)
        smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) printf "{gpus}" ;; *) printf "{apps}" ;; esac\n')
        smi.chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", "idle-gpus"], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_gpus_that_a_process_uses_are_not_probed(tmp_path: Path) -> None:
    assert _idle_gpus(tmp_path, []) == "--device 0 --device 1 --device 2 --device 3"
    assert _idle_gpus(tmp_path, [1, 1, 3]) == "--device 0 --device 2"
    assert _idle_gpus(tmp_path, [0, 1, 2, 3]) == "none"
    assert _idle_gpus(tmp_path, None) == ""  # no nvidia-smi: no --device, every GPU is measured


def test_the_nfd_example_selects_only_labels_the_daemonset_writes(tmp_path: Path) -> None:
    (pod,) = _kind("Pod")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = terms["nodeSelectorTerms"]
    for spec, selected in (("h200", True), ("rtx-pro-6000", False)):
        features = tmp_path / spec
        done = subprocess.run([sys.executable, "-m", "bisect_smem", "--simulate", spec, "--level", "quick", "--quiet",
                               "--nfd", str(features)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        labels = dict(line.split("=", 1) for line in features.read_text().splitlines() if not line.startswith("#"))
        matches = []
        for expression in term["matchExpressions"]:
            assert expression["key"] in labels, f"--level quick never writes {expression['key']}"
            value, wanted = labels[expression["key"]], expression["values"]
            matches.append(int(value) > int(wanted[0]) if expression["operator"] == "Gt" else value in wanted)
        assert all(matches) is selected, spec


def _npd(tmp_path: Path, check: Path) -> tuple[int, str]:
    """node-problem-detector's custom plugin run as NPD runs it: its exit code and its first 80 bytes."""
    done = subprocess.run(["/bin/sh", str(K8S / "npd-check.sh")], capture_output=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "BISECT_SMEM_CHECK": str(check)})
    return done.returncode, done.stdout[:80].decode()


def test_npd_reports_the_check_line_the_daemonset_left_on_the_host(tmp_path: Path) -> None:
    config = yaml.safe_load((K8S / "npd-bisect-smem.json").read_text())
    (rule,) = config["rules"]
    assert config["pluginConfig"]["max_output_length"] == 80 and rule["path"].endswith("bisect-smem-check.sh")
    check = tmp_path / "check"
    for spec, code in (("h200", 0), ("h200,optin=204800", 1), ("h200,sticky=100000", 2)):
        report = tmp_path / f"{spec}.json"
        subprocess.run([sys.executable, "-m", "bisect_smem", "--simulate", spec, "--level", "quick", "--quiet",
                        "--max-restarts", "0", "--json", str(report)], capture_output=True, timeout=60)
        line = subprocess.run([sys.executable, "-m", "bisect_smem", "check", str(report)], capture_output=True,
                              text=True, timeout=60)
        check.write_text(f"{line.stdout}{line.returncode}\n")  # as the DaemonSet's loop writes it
        assert _npd(tmp_path, check) == (code, line.stdout), spec
    old = time.time() - 4 * 3600
    os.utime(check, (old, old))
    assert _npd(tmp_path, check)[0] == 2 and _npd(tmp_path, check)[1].startswith("smem STALE")
    assert _npd(tmp_path, tmp_path / "missing")[0] == 2


def _shell_scripts() -> dict[str, str]:
    (daemonset,) = _kind("DaemonSet")
    (job,) = _kind("Job")
    loop = daemonset["spec"]["template"]["spec"]["containers"][0]["args"][0]
    once = job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    return {"npd-check.sh": (K8S / "npd-check.sh").read_text(), "idle-gpus": scripts()["idle-gpus"],
            "daemonset loop": "#!/bin/sh\n" + loop, "job": "#!/bin/sh\n" + once}


@pytest.mark.parametrize("name", sorted(_shell_scripts()))
def test_shellcheck_finds_nothing_in_the_pods_scripts(name: str) -> None:
    tool = consumer_tool("shellcheck", "`make test` installs it as root")
    done = subprocess.run([tool, "-s", "sh", "-"], input=_shell_scripts()[name], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout
