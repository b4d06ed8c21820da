"""Results of validating the shared memory itself: the march test per SM, the granule sweep, and what
an earlier kernel or process left behind. Frozen, with units in the field names; None for unknown."""

from __future__ import annotations

from bisect_smem.core.frozen import frozen

MARCH_PATTERNS = 37
MARCH_READS_PER_WORD = 3 * MARCH_PATTERNS  # elements 1, 2 and 3 read every word once per pattern
MARCH_PATTERN_NAMES = ("zeros", "ones", "checkerboard", "address", *(f"walking one {b}" for b in range(32)),
                       "random")
MARCH_ELEMENTS = ("ascending write", "ascending read P, write ~P", "descending read ~P, write P",
                  "descending read P")


@frozen
class SmMarch:
    """One block's march over one SM's whole dynamic shared memory; the first failure, if any.

    The first failure is the earliest in march order (pattern, then element), then the lowest word.
    """

    sm_id: int
    bytes_tested: int
    reads_checked: int
    bad_reads: int = 0
    first_bad_byte: int | None = None
    expected_word: int | None = None
    read_word: int | None = None
    pattern: int | None = None
    element: int | None = None

    @property
    def passed(self) -> bool:
        """No wrong read, and every word was read as often as the march reads it."""
        return self.bad_reads == 0 and self.reads_checked == MARCH_READS_PER_WORD * (self.bytes_tested // 4)


@frozen
class MarchResult:
    """The march over every SM: which SM ids ran (from %smid), over how many launches, and what failed."""

    dynamic_bytes: int
    threads: int
    sm_count: int | None = None  # what the driver reports
    sms_seen: tuple[int, ...] = ()
    launches: int = 0
    failures: tuple[SmMarch, ...] = ()

    @property
    def sms_missing(self) -> tuple[int, ...]:
        """SM ids below the reported count that never ran a block (ids are dense on every GPU so far)."""
        if self.sm_count is None:
            return ()
        return tuple(sorted(set(range(self.sm_count)) - set(self.sms_seen)))

    @property
    def covered(self) -> bool:
        """Every SM of the device ran the march."""
        return self.sm_count is not None and len(self.sms_seen) >= self.sm_count and not self.sms_missing


@frozen
class GranuleSweep:
    """A launch-and-verify at every granule multiple from 0 to the ceiling, and at the ceiling + 1 B."""

    granule_bytes: int
    ceiling_bytes: int
    sizes_tested: int
    failing_bytes: tuple[int, ...] = ()  # sizes at or below the ceiling that did not launch and verify
    failure_detail: str = ""  # the outcome of the first failing size
    over_ceiling_failed: bool | None = None  # the ceiling + 1 B must fail


@frozen
class Leftovers:
    """Words of the dynamic shared memory that still held an earlier writer's pattern when a kernel started
    and read it without writing: the writer was an earlier kernel of this process, or another process."""

    dynamic_bytes: int
    within_process_words_read: int
    within_process_words_matching: int
    across_processes_words_read: int
    across_processes_words_matching: int
    writer_sms: int  # SMs the other process wrote
    reader_sms: int  # SMs this process read

    @property
    def across_processes_visible(self) -> bool:
        """A kernel saw words an earlier, ended process left."""
        return self.across_processes_words_matching > 0
