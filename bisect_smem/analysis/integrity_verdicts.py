"""Rows for the shared memory's own validation (--level full): the march per SM, the granule sweep, and
what earlier kernels and processes left behind.

A bad byte on any SM and shared memory visible across processes are MISMATCH; a size below the ceiling
that fails means bisection's monotonicity does not hold (ERROR, every failing size listed); an SM the
march never reached is ERROR (not validated), named.
"""

from __future__ import annotations

from bisect_smem.analysis.compare import row
from bisect_smem.core.integrity import (
    MARCH_ELEMENTS,
    MARCH_PATTERN_NAMES,
    MARCH_PATTERNS,
    MARCH_READS_PER_WORD,
    GranuleSweep,
    Leftovers,
    MarchResult,
    SmMarch,
)
from bisect_smem.core.model import Measured
from bisect_smem.core.rows import Conclusion, Family, Verdict

MAX_SIZES_SHOWN = 64


def validation_verdicts(measured: Measured) -> list[Verdict]:
    """Every validation row of one device; none where the level did not validate."""
    rows: list[Verdict] = []
    if measured.march is not None:
        rows += march_verdicts(measured.march)
    if measured.granule_sweep is not None:
        rows += sweep_verdicts(measured.granule_sweep)
    if measured.leftovers is not None:
        rows += leftover_verdicts(measured.leftovers)
    return rows


def _failure_text(f: SmMarch) -> str:
    if f.first_bad_byte is None:
        return f"read {f.reads_checked} of {MARCH_READS_PER_WORD * (f.bytes_tested // 4)} words"
    return f"byte {f.first_bad_byte}: read {f.read_word:#010x}, expected {f.expected_word:#010x}"


def march_verdicts(march: MarchResult) -> list[Verdict]:
    """Coverage of the SMs, then one row per SM that failed (or one row saying every SM passed)."""
    seen = len(march.sms_seen)
    launches = f"{march.launches} launch{'es' if march.launches > 1 else ''}"
    if march.covered:
        rows = [row("SMs covered by the march (%smid)", march.sm_count, "driver SM count", seen, Conclusion.MATCH, [launches],
                    family=Family.MARCH_COVERAGE)]
    else:
        missing = march.sms_missing
        named = f"never ran: SM {', '.join(map(str, missing))}" if missing else "SM ids outside 0..count-1"
        rows = [row("SMs covered by the march (%smid)", march.sm_count, "driver SM count", seen, Conclusion.ERROR,
                    [f"{named} after {launches}"], family=Family.MARCH_COVERAGE)]
    for f in march.failures:
        where = ""
        if f.pattern is not None and f.element is not None:
            where = f"pattern {MARCH_PATTERN_NAMES[f.pattern]}, {MARCH_ELEMENTS[f.element]}; "
        rows.append(row(f"shared memory of SM {f.sm_id} (march test)", "every byte reads back", "march test",
                        _failure_text(f), Conclusion.MISMATCH, [f"{where}{f.bad_reads} wrong reads"], family=Family.MARCH))
    if not march.failures:
        rows.append(row("every SM's shared memory (march)", "every byte reads back", "march test",
                        f"{seen} SMs x {march.dynamic_bytes} B", Conclusion.MATCH,
                        [f"{MARCH_PATTERNS} patterns, ascending and descending, every bank"], family=Family.MARCH))
    return rows


def sweep_verdicts(sweep: GranuleSweep) -> list[Verdict]:
    """Every granule multiple up to the ceiling must launch and verify; the byte over must fail."""
    below = sweep.sizes_tested - 1
    label = f"every {sweep.granule_bytes} B multiple launches"
    if sweep.failing_bytes:
        shown = list(sweep.failing_bytes[:MAX_SIZES_SHOWN])
        more = f" and {len(sweep.failing_bytes) - len(shown)} more" if len(sweep.failing_bytes) > len(shown) else ""
        rows = [row(label, below, "sizes tested", below - len(sweep.failing_bytes), Conclusion.ERROR,
                    [f"not monotone: failed at {shown}{more} B below the ceiling", f"first: {sweep.failure_detail}"],
                    family=Family.GRANULE_SWEEP)]
    else:
        rows = [row(label, below, "sizes tested", below, Conclusion.MATCH,
                    [f"0..{sweep.ceiling_bytes} B: launched and verified, one synchronisation"],
                    family=Family.GRANULE_SWEEP)]
    over = sweep.ceiling_bytes + 1
    rows.append(row(f"{over} B (the ceiling + 1) fails", "fails", "limit",
                    "fails" if sweep.over_ceiling_failed else "launched",
                    Conclusion.MATCH if sweep.over_ceiling_failed else Conclusion.MISMATCH, family=Family.OVER_CEILING))
    return rows


def _visible(matching: int, read: int) -> str:
    return f"{'yes' if matching else 'no'} ({matching} of {read} words)"


def leftover_verdicts(left: Leftovers) -> list[Verdict]:
    """Across processes, visible data is a leak (MISMATCH); within a process it is expected (info)."""
    across = left.across_processes_visible
    note = f"another process wrote {left.writer_sms} SMs and exited; this one read {left.reader_sms} SMs unwritten"
    return [
        row("data of an earlier process visible", "no", "isolation between processes",
            _visible(left.across_processes_words_matching, left.across_processes_words_read),
            Conclusion.MISMATCH if across else Conclusion.MATCH, [note, *(["a data leak between tenants"] if across else [])],
            family=Family.LEFTOVERS),
        row("data of an earlier kernel visible", None, None,
            _visible(left.within_process_words_matching, left.within_process_words_read), Conclusion.INFO,
            ["expected: kernels of one process may see what an earlier one left"], family=Family.LEFTOVERS),
    ]
