"""The validation kernels' ABI (kernels/validate.cu): result-slot layout, the patterns mirrored in Python,
and the outcomes a backend hands to experiments/validation.py."""

from __future__ import annotations

from dataclasses import dataclass

from bisect_smem.core.integrity import MARCH_READS_PER_WORD, SmMarch
from bisect_smem.devices.backends.base import Outcome
from bisect_smem.devices.kernel_abi import VALIDATE_NAMES

MARCH_NAME, LEFTOVER_WRITE_NAME, LEFTOVER_READ_NAME = VALIDATE_NAMES
MARCH_SLOT_WORDS = 8
LEFTOVER_SLOT_WORDS = 4
MARCH_WALKING_FIRST = 4
MARCH_RANDOM = 36
MARCH_PATTERN_NAMES = ("zeros", "ones", "checkerboard", "address",
                       *(f"walking one {b}" for b in range(32)), "random")
MARCH_ELEMENTS = ("ascending write", "ascending read P, write ~P", "descending read ~P, write P",
                  "descending read P")
_M32, _M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


def _hash32(x: int) -> int:
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def march_word(pattern: int, index: int, seed: int) -> int:
    """The word the march writes at word ``index`` for ``pattern`` (mirror of march_word in validate.cu)."""
    if pattern == 0:
        return 0
    if pattern == 1:
        return _M32
    if pattern == 2:
        return 0xAAAAAAAA if index & 1 else 0x55555555
    if pattern == 3:
        return (index * 4) & _M32
    if pattern < MARCH_RANDOM:
        return 1 << ((index + pattern - MARCH_WALKING_FIRST) & 31)
    return _hash32(((index * 0x9E3779B9) & _M32) ^ seed)


def leftover_word(nonce: int, index: int) -> int:
    """The word the leftover writer puts at word ``index`` (mirror of leftover_word in validate.cu)."""
    z = (nonce + (index + 1) * 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return (z ^ (z >> 31)) & _M32


@dataclass(frozen=True)
class MarchOutcome:
    """One launch of the march kernel: a slot per block that ran (blocks that never ran are left out)."""

    outcome: Outcome
    detail: str = ""
    blocks: tuple[SmMarch, ...] = ()


@dataclass(frozen=True)
class LeftoverOutcome:
    """One launch of a leftover kernel: per block, its SM, the words written or read, and matches."""

    outcome: Outcome
    detail: str = ""
    sm_ids: tuple[int, ...] = ()
    words: int = 0
    matching_words: int = 0


def first_bad_byte(word_index: int, expected: int, read: int) -> int:
    """The byte offset of the lowest byte that differs (words are little-endian)."""
    diff = (expected ^ read) & _M32
    low = (diff & -diff).bit_length() - 1 if diff else 0
    return word_index * 4 + low // 8


def decode_march_slot(words: list[int]) -> SmMarch | None:
    """One block's result slot; None when the block never ran."""
    if len(words) != MARCH_SLOT_WORDS:
        raise ValueError(f"a march slot has {MARCH_SLOT_WORDS} words (got {len(words)})")
    if words[2] == 0:
        return None
    inverted = words[0] | (words[1] << 32)
    common = {"sm_id": words[2] - 1, "bytes_tested": words[7], "reads_checked": words[6]}
    if inverted == 0:
        return SmMarch(**common)
    key = ~inverted & _M64
    pattern, element, index = key >> 34, (key >> 32) & 3, key & _M32
    return SmMarch(**common, bad_reads=words[3], first_bad_byte=first_bad_byte(index, words[4], words[5]),
                   expected_word=words[4], read_word=words[5], pattern=pattern, element=element)


def decode_leftover_slots(words: list[int]) -> LeftoverOutcome:
    """Every block's leftover slot (LEFTOVER_SLOT_WORDS each) summed; blocks that never ran drop out."""
    sms, total, matched = [], 0, 0
    for b in range(0, len(words), LEFTOVER_SLOT_WORDS):
        sm_plus_one, count, match = words[b:b + 3]
        if sm_plus_one:
            sms.append(sm_plus_one - 1)
            total += count
            matched += match
    return LeftoverOutcome(Outcome.OK, "", tuple(sms), total, matched)


def simulate_march(sm_id: int, dynamic_bytes: int, seed: int, flip_byte: int | None) -> SmMarch:
    """What the march kernel reports for an SM whose every read of byte ``flip_byte`` has its low bit
    flipped (None: a sound SM): the march run in its own order on the one faulty word."""
    words = dynamic_bytes // 4
    checked = MARCH_READS_PER_WORD * words
    if flip_byte is None or not 0 <= flip_byte < words * 4:
        return SmMarch(sm_id, words * 4, checked)
    index, mask = flip_byte // 4, 1 << (8 * (flip_byte % 4))
    # A bit that reads inverted makes every read of its word wrong, so the first is the first read of
    # the march: pattern 0, element 1.
    expected = march_word(0, index, seed)
    read = expected ^ mask
    return SmMarch(sm_id, words * 4, checked, MARCH_READS_PER_WORD, first_bad_byte(index, expected, read),
                   expected, read, 0, 1)
