"""The files generated from the package are current (tools/generate.py --check, which `make generated`
rewrites), and the shells read the completions: bash parses the script and completes subcommands,
choices and options from it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.paths import ROOT

BASH = ROOT / "share" / "bash-completion" / "completions" / "bisect-smem"
ZSH = ROOT / "share" / "zsh" / "site-functions" / "_bisect-smem"
MAN = ROOT / "share" / "man" / "man1" / "bisect-smem.1"


def test_every_generated_file_is_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "generate.py"), "--check"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_bash_parses_the_completion() -> None:
    done = subprocess.run(["bash", "-n", str(BASH)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def _complete(*words: str) -> list[str]:
    """What bash completes for the command line ``bisect-smem WORDS`` (the last word being typed)."""
    script = (f'source "{BASH}"; COMP_WORDS=(bisect-smem {" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words)}; _shtab_bisect_smem; printf "%s\\n" "${{COMPREPLY[@]}}"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_subcommands_choices_and_options() -> None:
    assert _complete("ch") == ["check"]
    assert _complete("schema", "") == ["report", "fit", "baseline"]
    assert {"--prom", "--probe-timeout"} <= set(_complete("--pr"))
    assert _complete("export", "") == ["prom", "nfd"]


def test_zsh_parses_the_completion() -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    done = subprocess.run(["zsh", "-n", str(ZSH)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_the_man_page_names_every_subcommand_and_the_exit_codes() -> None:
    page = MAN.read_text()
    assert page.startswith('.TH BISECT\\-SMEM "1"')
    for command in ("profiles", "merge", "fit", "check", "export", "schema"):
        assert f"\\fI\\,{command}\\/\\fR" in page, command
    assert "no usable GPU or backend" in page
