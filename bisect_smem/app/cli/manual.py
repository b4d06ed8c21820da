"""What the man page says beyond the parser's options, as rows of (term, meaning): the exit status, the
environment the tool reads, the files it reads and writes, and the related pages. ``--help`` prints the exit
codes from the same rows (main.py); tools/generate.py writes all of them into the page's EXIT STATUS,
ENVIRONMENT, FILES and SEE ALSO sections."""

from __future__ import annotations

import textwrap

from bisect_smem.core import environment as variables

HELP_COLUMNS = 79  # the exit codes' rows in --help: they fit an 80-column terminal
Rows = tuple[tuple[str, str], ...]

EXIT_STATUS: Rows = (
    ("0", "no limit or source disagrees (rows that differ from a prediction or hint allowed, unless --strict)"),
    ("1", "a mismatch or regression was found (or, with --strict, a row that differs)"),
    ("2", "bad usage or bad input, or a file or stream that cannot be written (a full disk, a closed or "
          "broken stdout)"),
    ("3", "no usable GPU or backend"),
    ("4", "a measurement could not be completed"),
    ("128+N", "ended by signal N (130 Ctrl-C, 129 SIGHUP, 143 SIGTERM): every process it started ended; the "
              "line names the files written before it"),
)
EXIT_STATUS_NOTE = ("The files asked for are written before stdout: a failing stdout costs none of them. "
                    "Subcommands whose codes differ (check, fit, merge, trace, export) list them in their help.")

# (page, section): the tools a report is read beside, and the fleet recipes' hosts (docs/fleets.md).
SEE_ALSO: tuple[tuple[str, str], ...] = (("nvidia-smi", "1"), ("promtool", "1"), ("slurm.conf", "5"),
                                         ("nhc", "8"))
SEE_ALSO_NOTE = ("The user guide is docs/ in the source (mkdocs): install, outputs, fit, trace, fleets, exit "
                 "codes.")


def environment() -> Rows:
    """Every variable the tool reads or sets: its own, as core/environment declares them, then others'."""
    return (
        *variables.MEANINGS.items(),
        ("XDG_CACHE_HOME", "where a collector built with the C compiler is kept: $XDG_CACHE_HOME/bisect-smem "
                           "(default ~/.cache/bisect-smem)"),
        ("CUDA_HOME, CUDA_PATH", "the CUDA toolkit searched for ptxas and libcupti (then /usr/local/cuda)"),
        ("CUDA_VISIBLE_DEVICES", "the GPUs measured, as CUDA numbers them"),
        ("CUPY_CACHE_DIR", "CuPy's kernel cache, beside which compiled probe kernels are kept"),
    )


FILES: Rows = (
    ("/var/lib/bisect-smem/report.json", "the report check reads by default (the fleet recipes write it)"),
    ("~/.cache/bisect-smem/", "collectors built with the C compiler, by the hash of their source"),
    ("~/.cupy/kernel_cache/bisect_smem/", "compiled probe kernels"),
    ("~/.local/share/bash-completion/completions/bisect-smem",
     "where bash-completion finds the completion (bisect-smem completion bash)"),
    ("~/.local/share/man/man1/bisect-smem.1", "where man finds this page for one user (bisect-smem man)"),
)


def exit_codes_help(columns: int = HELP_COLUMNS) -> str:
    """The exit codes as --help prints them: a row each, the meaning wrapped after the code's column."""
    indent = " " * (2 + max(len(code) for code, _ in EXIT_STATUS) + 2)
    rows = [textwrap.fill(meaning, columns, initial_indent=f"  {code}".ljust(len(indent)), subsequent_indent=indent,
                         break_on_hyphens=False)
            for code, meaning in EXIT_STATUS]
    return "\n".join(["exit codes:", *rows, textwrap.fill(EXIT_STATUS_NOTE, columns, break_on_hyphens=False)]) + "\n"
