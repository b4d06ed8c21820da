"""What `make test` does to the machine: apt installs its packages without starting their services (a
policy-rc.d that forbids every start while apt-get runs, removed after), and the README's first screen says
what it installs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.paths import ROOT

SCRIPT = ROOT / "tools" / "apt-install-stopped.sh"

# apt-get as the install sees it: where a maintainer script would start a service, it asks policy-rc.d
# (as invoke-rc.d and deb-systemd-invoke do) and notes the answer; `fail` ends the install with an error.
FAKE_APT = """#!/bin/sh
case "$1" in update) exit 0 ;; esac
if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" prometheus start; echo "$?" >> "$ANSWERS"; else echo none >> "$ANSWERS"; fi
echo "$@" >> "$ARGS"
[ -z "${FAIL:-}" ]
"""


def _install(tmp_path: Path, *packages: str, fail: bool = False) -> tuple[int, list[str], Path]:
    tools, policy = tmp_path / "bin", tmp_path / "policy-rc.d"
    tools.mkdir(exist_ok=True)
    (tools / "apt-get").write_text(FAKE_APT)
    (tools / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "POLICY_RC_D": str(policy),
           "ANSWERS": str(tmp_path / "answers"), "ARGS": str(tmp_path / "args"), **({"FAIL": "1"} if fail else {})}
    done = subprocess.run(["sh", str(SCRIPT), *packages], capture_output=True, text=True, timeout=60, env=env)
    return done.returncode, (tmp_path / "answers").read_text().split(), policy


def test_no_service_starts_while_apt_installs_and_the_policy_goes_after(tmp_path: Path) -> None:
    code, answers, policy = _install(tmp_path, "--no-install-recommends", "prometheus", "munge")
    assert code == 0 and answers == ["101"] and not policy.exists()
    assert (tmp_path / "args").read_text().split()[-3:] == ["--no-install-recommends", "prometheus", "munge"]


def test_a_failed_install_still_removes_the_policy_and_fails(tmp_path: Path) -> None:
    code, answers, policy = _install(tmp_path, "slurmd", fail=True)
    assert code != 0 and answers == ["101"] and not policy.exists()


def test_the_hosts_own_policy_is_left_as_it_was(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 0\n")
    policy.chmod(0o755)
    code, answers, _ = _install(tmp_path, "zsh")
    assert code == 0 and answers == ["0"] and policy.read_text() == "#!/bin/sh\nexit 0\n"


def test_make_installs_every_package_through_it() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert not re.search(r"apt-get install", makefile)
    assert makefile.count("tools/apt-install-stopped.sh") >= 2


def test_the_first_screen_says_what_make_test_installs() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    packages = re.search(r"^FLEET_PACKAGES := (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    for shown in (*packages.split(), "promtool", "shellcheck", "zsh", "bash-completion", "man-db", "qemu-user",
                  "not started",
                  "minutes", "2 GB"):
        assert shown in first_screen, shown
