"""The validation kernels' ABI (kernels/validate.cu): result-slot layout, the patterns mirrored in Python,
and the decoding of a launch's slots into the outcomes of devices/probes.py."""

from __future__ import annotations

import enum

from bisect_smem.core.integrity import SmMarch
from bisect_smem.devices.kernel_abi import VALIDATE_NAMES
from bisect_smem.devices.probes import LeftoverOutcome, Outcome

MARCH_NAME, LEFTOVER_WRITE_NAME, LEFTOVER_READ_NAME = VALIDATE_NAMES


class MarchWord(enum.IntEnum):
    """The words of one block's march slot (``slots + 8 * blockIdx.x`` in kernels/validate.cu)."""

    INVERTED_KEY_LOW = 0  # ~key of the first failure, low word (0 and 0: no failure)
    INVERTED_KEY_HIGH = 1  # key = pattern << 34 | element << 32 | word index
    SM_ID_PLUS_ONE = 2  # %smid + 1; 0: the block never ran
    BAD_READS = 3
    EXPECTED_WORD = 4
    READ_WORD = 5
    READS_CHECKED = 6
    BYTES_TESTED = 7


class LeftoverWord(enum.IntEnum):
    """The words of one block's leftover slot (``slots + 4 * blockIdx.x``)."""

    SM_ID_PLUS_ONE = 0
    WORDS = 1  # words written (writer) or read (reader)
    MATCHING = 2  # words that still held the writer's pattern (reader only)
    UNUSED = 3


MARCH_SLOT_WORDS = len(MarchWord)
LEFTOVER_SLOT_WORDS = len(LeftoverWord)
MARCH_WALKING_FIRST = 4
MARCH_RANDOM = 36
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


def first_bad_byte(word_index: int, expected: int, read: int) -> int:
    """The byte offset of the lowest byte that differs (words are little-endian)."""
    diff = (expected ^ read) & _M32
    low = (diff & -diff).bit_length() - 1 if diff else 0
    return word_index * 4 + low // 8


def decode_march_slot(words: list[int]) -> SmMarch | None:
    """One block's result slot; None when the block never ran."""
    if len(words) != MARCH_SLOT_WORDS:
        raise ValueError(f"a march slot has {MARCH_SLOT_WORDS} words (got {len(words)})")
    w = MarchWord
    if words[w.SM_ID_PLUS_ONE] == 0:
        return None
    inverted = words[w.INVERTED_KEY_LOW] | (words[w.INVERTED_KEY_HIGH] << 32)
    common = {"sm_id": words[w.SM_ID_PLUS_ONE] - 1, "bytes_tested": words[w.BYTES_TESTED],
              "reads_checked": words[w.READS_CHECKED]}
    if inverted == 0:
        return SmMarch(**common)
    key = ~inverted & _M64
    pattern, element, index = key >> 34, (key >> 32) & 3, key & _M32
    expected, read = words[w.EXPECTED_WORD], words[w.READ_WORD]
    return SmMarch(**common, bad_reads=words[w.BAD_READS], first_bad_byte=first_bad_byte(index, expected, read),
                   expected_word=expected, read_word=read, pattern=pattern, element=element)


def decode_leftover_slots(words: list[int]) -> LeftoverOutcome:
    """Every block's leftover slot (LEFTOVER_SLOT_WORDS each) summed; blocks that never ran drop out."""
    sms, total, matched = [], 0, 0
    for b in range(0, len(words), LEFTOVER_SLOT_WORDS):
        sm_plus_one = words[b + LeftoverWord.SM_ID_PLUS_ONE]
        count, match = words[b + LeftoverWord.WORDS], words[b + LeftoverWord.MATCHING]
        if sm_plus_one:
            sms.append(sm_plus_one - 1)
            total += count
            matched += match
    return LeftoverOutcome(Outcome.OK, "", tuple(sms), total, matched)
