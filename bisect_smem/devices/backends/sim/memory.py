"""The simulated device's shared memory, for the validation kernels: a march over each SM's whole array
(one SM may read one bit wrong), and what a leftover writer left there, which outlives its context on a
device that leaks (kept in a file under the temporary folder until a reader takes it, as the real
device's memory outlives processes). One block runs per SM at a time, so block b lands on SM b mod count.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

from bisect_smem.core.errors import MeasurementError
from bisect_smem.core.integrity import MARCH_READS_PER_WORD, SmMarch
from bisect_smem.devices.probes import LeftoverOutcome, MarchFault, MarchOutcome, Outcome
from bisect_smem.devices.validation_abi import first_bad_byte, march_word


class SharedMemory:
    """Per SM, the nonce of the last leftover writer there and how many words it wrote."""

    def __init__(self, sm_count: int, bitflip: tuple[int, int] | None = None, leak: bool = False) -> None:
        """``bitflip``: (SM, byte offset) that reads one bit wrong; ``leak``: the memory outlives a context."""
        self.sm_count, self.bitflip, self.leak = sm_count, bitflip, leak
        self._residue: dict[int, tuple[int, int]] = {}  # SM -> (nonce, words) of the last leftover writer

    def _sms(self, blocks: int) -> list[int]:
        return [b % self.sm_count for b in range(blocks)]

    def march(self, dynamic_bytes: int, blocks: int, seed: int, planted: MarchFault | None = None) -> MarchOutcome:
        """The march test on each block's SM; it overwrites the whole array. ``planted`` (test only): the
        march kernel's own fault variant, one word flipped once instead of a bit that always reads wrong."""
        flip_sm, flip_byte = (planted.sm_id, planted.byte) if planted else self.bitflip or (None, None)
        results = []
        for sm in self._sms(blocks):
            self._residue.pop(sm, None)
            results.append(simulate_march(sm, dynamic_bytes, seed, flip_byte if sm == flip_sm else None,
                                          planted is not None))
        return MarchOutcome(Outcome.OK, "", tuple(results))

    def write(self, dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """Every block's SM filled with ``nonce``'s pattern."""
        sms = self._sms(blocks)
        for sm in sms:
            self._residue[sm] = (nonce, dynamic_bytes // 4)
        return LeftoverOutcome(Outcome.OK, "", tuple(sms), len(sms) * (dynamic_bytes // 4))

    def read(self, dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """The words of ``nonce``'s pattern each block finds, left by this context or an ended one."""
        path = leftover_file(nonce)
        earlier = {int(sm): words for sm, words in json.loads(path.read_text()).items()} if path.is_file() else {}
        path.unlink(missing_ok=True)
        sms = self._sms(blocks)
        words = dynamic_bytes // 4
        matching = 0
        for sm in sms:
            mine = self._residue.get(sm)
            kept = mine[1] if mine is not None and mine[0] == nonce else earlier.get(sm, 0)
            matching += min(kept, words)
        return LeftoverOutcome(Outcome.OK, "", tuple(sms), len(sms) * words, matching)

    def close(self) -> None:
        """The context ends: on a device that leaks, what it wrote stays for a later process."""
        if self.leak and self._residue:
            by_nonce: dict[int, dict[int, int]] = {}
            for sm, (nonce, words) in self._residue.items():
                by_nonce.setdefault(nonce, {})[sm] = words
            for nonce, sms in by_nonce.items():
                leftover_file(nonce).write_text(json.dumps(sms))
        self._residue.clear()


def leftover_file(nonce: int) -> Path:
    """Where a leaking simulated device keeps what a context left in shared memory after the context ends:
    the state of the device, which outlives processes as the real one does. The folder is this user's
    own (not a link, owned by them, writable by no one else), checked each time: one planted there by
    someone else is refused (MeasurementError), never followed."""
    folder = Path(tempfile.gettempdir()) / f"bisect-smem-sim-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise MeasurementError(f"the simulated device keeps its state in {folder}: {exc.strerror or exc}") from None
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise MeasurementError(f"the simulated device keeps its state in {folder}, which is not a folder of this "
                               "user's alone (a link, another owner, or writable by others): remove it")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, 0o700)  # this user's, and nobody else could write in it: make it private
    return folder / f"leftover-{nonce:016x}.json"


def simulate_march(sm_id: int, dynamic_bytes: int, seed: int, flip_byte: int | None, once: bool = False) -> SmMarch:
    """What the march kernel reports for an SM whose every read of byte ``flip_byte`` has its low bit
    flipped (None: a sound SM), or with ``once`` whose byte was flipped once, between the first write
    and the first read (smem_march_fault): the march run in its own order on the one faulty word."""
    words = dynamic_bytes // 4
    checked = MARCH_READS_PER_WORD * words
    if flip_byte is None or not 0 <= flip_byte < words * 4:
        return SmMarch(sm_id, words * 4, checked)
    index, mask = flip_byte // 4, 1 << (8 * (flip_byte % 4))
    # Either way the first wrong read is the first read of the march: pattern 0, element 1. A bit that
    # reads inverted makes every read of its word wrong; one flipped once is put right by that element's write.
    expected = march_word(0, index, seed)
    read = expected ^ mask
    return SmMarch(sm_id, words * 4, checked, 1 if once else MARCH_READS_PER_WORD,
                   first_bad_byte(index, expected, read), expected, read, 0, 1)
