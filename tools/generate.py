"""Write the files generated from the package: the published JSON Schemas (from the model), and the
shell completions and the man page (from build_parser(), by shtab and argparse-manpage), and the output
under every command the README and docs/ show in a console block (by running it: tools/doc_commands.py).

    python tools/generate.py          # rewrite every generated file (make generated)
    python tools/generate.py --check  # exit 1 naming each file that is not current (the test suite runs it)

Needs the test extra (shtab, argparse-manpage).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))  # doc_commands, beside this script, whether run or imported by a test

import completion_tags  # noqa: E402
import doc_commands  # noqa: E402

# argparse wraps usage lines to the terminal (COLUMNS): the man page is written as at 80 columns wherever it
# is generated or checked.
os.environ["COLUMNS"] = "80"


def _completion(shell: str) -> Callable[[], str]:
    def make() -> str:
        import shtab

        from bisect_smem.app.cli.main import build_parser

        script = shtab.complete(completion_tags.tag(build_parser()), shell=shell, preamble=completion_tags.preamble(shell))
        # bashdefault alone falls back to bash's own completions, never to file names: where no choice or
        # option matches (--simulate r<TAB>, a file after --tile), -o default offers the files.
        return script.replace("complete -o bashdefault -F", "complete -o bashdefault -o default -F")
    return make


def _man_page() -> str:
    from argparse_manpage.manpage import Manpage

    from bisect_smem import __version__
    from bisect_smem.app.cli import manual
    from bisect_smem.app.cli.main import build_parser

    parser = build_parser()
    parser.epilog = None  # the exit codes are the page's EXIT STATUS section, not argparse-manpage's COMMENTS
    # NAME is "bisect-smem - <summary>" (the package's one summary), which lexgrog, whatis and apropos read.
    page = Manpage(parser, _data={"description": _summary()})
    page.source = f"bisect-smem {__version__}"
    page.manual = "bisect-smem manual"
    page.date = f"version {__version__}"  # not today's date, so the page changes only when the parser does
    page.add_section("EXIT STATUS", ">", _roff_rows(manual.EXIT_STATUS) + f".PP\n{_roff(manual.EXIT_STATUS_NOTE)}")
    page.add_section("ENVIRONMENT", ">", _roff_rows(manual.environment()))
    page.add_section("FILES", ">", _roff_rows(manual.FILES))
    see_also = ",\n".join(f"\\fB{_roff(name)}\\fR({section})" for name, section in manual.SEE_ALSO)
    page.add_section("SEE ALSO", ">", f"{see_also}\n.PP\n{_roff(manual.SEE_ALSO_NOTE)}")
    return str(page)


def _roff(text: str) -> str:
    """``text`` as roff prints it literally: backslashes and hyphens escaped, no line starting a request."""
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + escaped if escaped[:1] in (".", "'") else escaped


def _roff_rows(rows: tuple[tuple[str, str], ...]) -> str:
    """A tagged paragraph per row: the term in bold, its meaning indented below it."""
    return "".join(f".TP\n\\fB{_roff(term)}\\fR\n{_roff(meaning)}\n" for term, meaning in rows)


def _summary() -> str:
    """The package's summary (pyproject's description) as a man page's NAME line wants it: no final stop."""
    import tomllib

    summary = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    return summary[0].lower() + summary[1:].rstrip(".")


def _schema(kind: str) -> Callable[[], str]:
    def make() -> str:
        from bisect_smem.app.outputs.schemas import generated, text

        return text(generated()[kind])
    return make


def _page(path: Path) -> Callable[[], str]:
    def make() -> str:
        return doc_commands.regenerate(path, ROOT)
    return make


def files() -> dict[Path, Callable[[], str]]:
    """Every generated file, by path below the repository, with the function that makes its text."""
    from bisect_smem.app.outputs.schema_files import KINDS, file_name
    from bisect_smem.share import FILES

    share = Path("bisect_smem/share")
    made: dict[Path, Callable[[], str]] = {
        share / FILES["bash"]: _completion("bash"), share / FILES["zsh"]: _completion("zsh"),
        share / FILES["man"]: _man_page,
    }
    for kind in KINDS:
        made[Path("bisect_smem/schemas") / file_name(kind)] = _schema(kind)
    for page in doc_commands.pages(ROOT):
        if any(b.language == "console" for b in doc_commands.blocks(page.read_text(encoding="utf-8"))):
            made[page.relative_to(ROOT)] = _page(page)
    return made


def stale(root: Path = ROOT) -> dict[Path, str]:
    """Each generated file whose text is not what it would be generated as now, with a short diff."""
    out = {}
    for path, make in files().items():
        want = make()
        have = (root / path).read_text() if (root / path).exists() else ""
        if have != want:
            diff = difflib.unified_diff(have.splitlines(), want.splitlines(), str(path), "generated", lineterm="", n=1)
            out[path] = "\n".join(list(diff)[:20])
    return out


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated files, or with --check say which are not current (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a file is not current")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for path, diff in out_of_date.items():
            print(f"{path} is not current (run `make generated`):\n{diff}", file=sys.stderr)
        return 1 if out_of_date else 0
    for path, make in files().items():
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(make())
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
