"""The files generated from the package are current (tools/generate.py --check, which `make generated`
rewrites), and the shells read the completions: bash parses the script and completes subcommands,
choices and options from it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import consumer_tool
from tests.paths import ROOT

BASH = ROOT / "bisect_smem" / "share" / "bisect-smem.bash"
ZSH = ROOT / "bisect_smem" / "share" / "_bisect-smem"
MAN = ROOT / "bisect_smem" / "share" / "bisect-smem.1"


def test_every_generated_file_is_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "generate.py"), "--check"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_bash_parses_the_completion() -> None:
    done = subprocess.run(["bash", "-n", str(BASH)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def _complete(*words: str, cwd: Path = ROOT) -> list[str]:
    """What bash completes for the command line ``bisect-smem WORDS`` (the last word being typed)."""
    script = (f'source "{BASH}"; COMP_WORDS=(bisect-smem {" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words)}; _shtab_bisect_smem; printf "%s\\n" "${{COMPREPLY[@]}}"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_subcommands_choices_and_options() -> None:
    assert _complete("ch") == ["check"]
    assert _complete("schema", "") == ["report", "fit", "baseline", "trace", "profiles", "merge", "check"]
    assert {"--prom", "--probe-timeout"} <= set(_complete("--pr"))
    assert _complete("export", "") == ["prom", "nfd"]


def test_zsh_parses_the_completion() -> None:
    consumer_tool("zsh", "`make test` installs it as root")
    done = subprocess.run(["zsh", "-n", str(ZSH)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_the_man_page_names_every_subcommand_and_the_exit_codes() -> None:
    page = MAN.read_text()
    assert page.startswith('.TH BISECT\\-SMEM "1"')
    for command in ("profiles", "merge", "fit", "check", "export", "schema"):
        assert f"\\fI\\,{command}\\/\\fR" in page, command
    assert "no usable GPU or backend" in page


def _man_sections() -> dict[str, str]:
    """The man page as man formats it (man -l, at 100 columns), by section heading."""
    consumer_tool("man", "`make test` installs man-db as root")
    done = subprocess.run(["man", "-l", str(MAN)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MANWIDTH": "100", "MAN_KEEP_FORMATTING": "", "MANPAGER": "cat"})
    assert done.returncode == 0, done.stderr
    parts = re.split(r"^([A-Z][A-Z ]+)$", done.stdout, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_man_page_has_exit_status_environment_files_and_see_also() -> None:
    sections = _man_sections()
    assert {"EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"} <= set(sections) and "COMMENTS" not in sections
    # each code is a row of its own: the code alone at the start of its line, its meaning beside it
    for code, meaning in (("0", "no limit or source disagrees"), ("3", "no usable GPU or backend"),
                          ("4", "a measurement could not be completed"), ("128+N", "ended by signal N")):
        words = r"\s+".join(map(re.escape, meaning.split()))  # man justifies the lines: any run of spaces
        assert re.search(rf"^ +{re.escape(code)} +{words}", sections["EXIT STATUS"], re.MULTILINE), code
    assert "/var/lib/bisect-smem/report.json" in sections["FILES"]
    assert "nvidia-smi(1)" in sections["SEE ALSO"]


def test_the_man_page_names_every_variable_the_tool_reads() -> None:
    source = "".join(p.read_text(errors="replace") for p in (ROOT / "bisect_smem").rglob("*")
                     if p.suffix in (".py", ".c", ".h") and p.is_file())
    read = set(re.findall(r"BISECT_SMEM_[A-Z0-9_]+", source)) | {"XDG_CACHE_HOME", "CUDA_INJECTION64_PATH"}
    listed = set(re.findall(r"^ {7}([A-Z][A-Z0-9_]+)", _man_sections()["ENVIRONMENT"], re.MULTILINE))
    assert read <= listed, read - listed


def test_bash_completes_files_folders_and_the_tools_tables(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "reports").mkdir()
    (tmp_path / "kernel.cubin").write_bytes(b"")
    for words in (("--json", "re"), ("merge", "re"), ("check", "re"), ("export", "prom", "re"), ("--prom", "re")):
        assert set(_complete(*words, cwd=tmp_path)) == {"report.json", "reports"}, words
    assert _complete("fit", "--cubin", "k", cwd=tmp_path) == ["kernel.cubin"]
    assert _complete("--compare", "re", cwd=tmp_path) == ["reports"]
    assert _complete("--save-baseline", "", cwd=tmp_path) == ["reports"]
    assert _complete("--backend", "") == ["cupy", "numba", "sim", "all"]
    assert {"h200", "rtx-pro-6000", "sm_90"} <= set(_complete("--simulate", ""))
    assert _complete("--level", "q") == ["quick"]
    assert {"nvfp4", "bf16"} <= set(_complete("fit", "--dtype", ""))
    assert _complete("fit", "--schedule", "p") == ["pingpong"]
    assert _complete("completion", "") == ["bash", "zsh"]


def test_bash_completes_the_traced_command_and_reports_for_simulate(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "reports").mkdir()
    (tmp_path / "notes.txt").write_text("")
    assert _complete("trace", "--", "ech") == ["echo"]
    assert _complete("trace", "--out", "x", "--strict", "--", "ech") == ["echo"]
    # the traced command's own arguments: files, where bash-completion is not loaded to ask the command's own
    assert set(_complete("trace", "--", "echo", "re", cwd=tmp_path)) == {"report.json", "reports"}
    assert set(_complete("--simulate", "", cwd=tmp_path)) >= {"h200", "report.json", "reports"}
    assert "notes.txt" not in _complete("--simulate", "", cwd=tmp_path)
    assert _complete("fit", "1", "--simulate", "h20", cwd=tmp_path) == ["h200"]


BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")


def test_with_bash_completion_the_traced_command_completes_as_its_own(tmp_path: Path) -> None:
    if not BASH_COMPLETION.is_file():
        if os.environ.get("CI"):
            pytest.fail("bash-completion must be installed on CI: `make test` installs it as root")
        pytest.skip("bash-completion is not installed (`make test` installs it as root)")
    (tmp_path / "report.json").write_text("{}")
    script = (f'source "{BASH_COMPLETION}"; source "{BASH}"; '
              'comp() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$*"; '
              'COMP_POINT=${#COMP_LINE}; COMPREPLY=(); _shtab_bisect_smem; printf "%s\\n" "${COMPREPLY[@]}"; '
              'echo "<<end>>"; }; '
              'comp bisect-smem trace -- ls --col; comp bisect-smem trace -- bisect-smem sch')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    ls_options, nested, _ = done.stdout.split("<<end>>\n")
    assert "--color" in ls_options.split(), done.stdout  # ls's own options, from bash-completion's rules
    assert nested.split() == ["schema"]  # a command with a completion of its own: this one, again


def test_bash_falls_back_to_files_where_nothing_else_matches() -> None:
    # -o default: the shell's own file completion where the script offers nothing (a report for --simulate)
    assert "complete -o bashdefault -o default -F _shtab_bisect_smem bisect-smem" in BASH.read_text()


def _zsh_spec(option: str) -> str:
    """The _arguments spec of ``option`` in the zsh function (its help, metavar and completer)."""
    return next(line for line in ZSH.read_text().splitlines() if f'"{option}[' in line or f'"*{option}[' in line)


def test_zsh_specs_complete_files_folders_and_choices() -> None:
    # zsh's completion system runs only inside a line editor; what it would offer is the spec's action.
    for option in ("--json", "--prom", "--nfd", "--plot", "--cubin", "--ptx", "--target"):
        assert _zsh_spec(option).endswith(':_files"'), option
    for option in ("--compare", "--save-baseline"):
        assert _zsh_spec(option).endswith(':_files -/"'), option
    assert _zsh_spec("--backend").endswith(":(cupy numba sim all)\"")
    assert " nvfp4 " in _zsh_spec("--dtype")
    # --simulate takes a profile or a saved report: a function offers both
    assert _zsh_spec("--simulate").endswith(':_bisect_smem_profile_or_report"')
    assert re.search(r"_alternative 'profiles:profile:\([^)]* h200 [^)]*\)' 'reports:report:_files -g \"\*\.json\"'",
                     ZSH.read_text())


# zsh completes only inside its line editor, so a zsh is started on a pseudo-terminal (zsh/zpty) with the
# shipped function on its fpath, the line is typed with a TAB, and compadd prints what it is given. The TAB
# is followed by a key whose widget prints <<END>>: zle runs it only once the completion is done, so the
# output is read up to it, however long a loaded machine takes (no sleep). READY2 is the output of the last
# line typed before (its echo reads READY$((1+1))): the echoes of the lines before it are all read by then.
ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "fpath=($FUNCS \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'PROMPT=; compadd () { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi; typeset -a __hits; builtin compadd -A __hits "$@"; local h; for h in $__hits; do print -r -- "<<$h>>"; done; }'
zpty -w z "_mark_end() { zle -I; print '<<''END>>' }; zle -N _mark_end; bindkey '^Xe' _mark_end"
zpty -w z "bindkey '^I' complete-word; print \"<<READY\$((1+1))>>\""
zpty -r z line '*<<READY2>>*'
zpty -w -n z "$1"$'\t'$'\x18'e
zpty -r z out '*<<END>>*'
print -r -- "$out"
zpty -d z
"""


def _zsh_candidates(line: str, cwd: Path) -> set[str]:
    done = subprocess.run(["zsh", "-f", "-c", ZSH_CAPTURE, "capture", line], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, "FUNCS": str(ZSH.parent)})
    return set(re.findall(r"<<([^<>]*)>>", done.stdout)) - {"READY2", "END"}


def test_zsh_offers_choices_and_files_in_a_real_line_editor(tmp_path: Path) -> None:
    consumer_tool("zsh", "`make test` installs it as root")
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "reports").mkdir()
    assert _zsh_candidates("bisect-smem --backend ", tmp_path) == {"cupy", "numba", "sim", "all"}
    assert _zsh_candidates("bisect-smem fit --dtype nv", tmp_path) == {"nvfp4"}
    for line in ("bisect-smem --json re", "bisect-smem merge re", "bisect-smem check re"):
        assert _zsh_candidates(line, tmp_path) == {"report.json", "reports"}, line
    assert "reports" in _zsh_candidates("bisect-smem --compare re", tmp_path)


def test_zsh_completes_the_traced_command_and_reports_for_simulate(tmp_path: Path) -> None:
    consumer_tool("zsh", "`make test` installs it as root")
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "reports").mkdir()
    assert "echo" in _zsh_candidates("bisect-smem trace -- ech", tmp_path)
    assert "echo" in _zsh_candidates("bisect-smem trace --strict -- ech", tmp_path)
    assert _zsh_candidates("bisect-smem trace -- ls re", tmp_path) == {"report.json", "reports"}
    for line in ("bisect-smem --simulate re", "bisect-smem fit 1 --simulate re", "bisect-smem trace --simulate re"):
        assert _zsh_candidates(line, tmp_path) == {"report.json", "reports"}, line
    assert _zsh_candidates("bisect-smem --simulate h20", tmp_path) == {"h200"}


def test_the_man_page_has_a_name_whatis_reads() -> None:
    consumer_tool("lexgrog", "`make test` installs man-db as root")
    done = subprocess.run(["lexgrog", str(MAN)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and '"bisect-smem - measure how much shared memory' in done.stdout, done.stdout


def test_completion_and_man_print_what_the_package_ships() -> None:
    for argv, shipped in ((["completion", "bash"], BASH), (["completion", "zsh"], ZSH), (["man"], MAN)):
        done = subprocess.run([sys.executable, "-m", "bisect_smem", *argv], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
        assert done.returncode == 0 and done.stdout == shipped.read_text(), argv


def test_the_wheel_ships_the_completions_and_the_man_page() -> None:
    import tomllib

    from bisect_smem.share import FILES, PACKAGE

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert PACKAGE in tool["packages"] and set(FILES.values()) <= set(tool["package-data"][PACKAGE])


def test_man_finds_the_page_where_pip_puts_it_beside_the_command(tmp_path: Path) -> None:
    # pip installs the wheel's data files under the environment's prefix (a venv, or ~/.local with --user);
    # man-db searches PREFIX/share/man for every PREFIX/bin on PATH: no MANPATH needed.
    import tomllib

    consumer_tool("man", "`make test` installs man-db as root")
    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    folder = next(f for f, files in data_files.items() if str(MAN.relative_to(ROOT)) in files)
    assert folder == "share/man/man1"
    (tmp_path / "bin").mkdir()
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / MAN.name).write_text(MAN.read_text())
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    done = subprocess.run(["man", "-w", "bisect-smem"], capture_output=True, text=True, timeout=30,
                          env={**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path / folder / MAN.name), done.stderr
