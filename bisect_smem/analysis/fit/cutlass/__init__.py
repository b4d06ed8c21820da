"""CUTLASS's shared storage, family by family, as the library's collective builders compute it: the
stage count ``StageCountAutoCarveout`` picks (or a fixed ``StageCount<N>``), each ``SharedStorage``'s
size and ``GemmKernel::SharedStorageSize``. The rules were read from CUTLASS_VERSION and are checked
byte for byte against real builds of it (tests/data/cutlass_truth.json).

A release is placed by the rules it has, not by its name: RULES names the release where each rule the
model follows first appears, and a release counts with every rule first seen at or before it. Each rule is
backed by builds of every release (tests/data/cutlass_truth_release_<version>.json)."""



from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen

LIBRARY = "CUTLASS"  # as a person names it
CUTLASS_VERSION = "4.7.0"  # the default release, whose builds tests/data/cutlass_truth.json holds
# Every release --cutlass-version places, oldest first: each one's builds of the release set are committed.
CUTLASS_VERSIONS = ("4.4.1", "4.4.2", "4.4.3", "4.5.0", "4.5.1", "4.5.2", "4.5.3", "4.6.0", "4.6.1", "4.6.2",
                    "4.7.0")
FIRST = CUTLASS_VERSIONS[0]


@frozen
class Rule:
    """A rule of CUTLASS's builders or kernels that the model follows, and the release where it first appears."""

    what: str
    first: str


SM120_RESERVES = Rule("sm_120's block-scaled builder takes the kernel's scheduler, CLC and tensor-map storage off "
                      "its capacity", "4.4.2")
SM120_MX_PTR_ARRAY = Rule("sm_120's block-scaled f6/f8 operands take the ptr-array cooperative and ping-pong "
                          "schedules (sm1xx_common's MX_F4F6F8 check)", "4.4.2")
SM120_SFB_128 = Rule("sm_120's SFB tile holds N rounded up to 128 rows (before: N rounded down to 128-row blocks, "
                     "so a tile N under 128 had none and the kernel did not compile)", "4.5.0")
SM100_2SM_EPILOGUE_N = Rule("sm_100's 2-SM TMA epilogue with 16-bit C or D asserts a tile N of at most 128 or a "
                            "multiple of 64", "4.5.2")
SM120_DENSE_PTR_ARRAY = Rule("sm_120's dense (F8F6F4) builder takes ptr-array kernels (sm120_array_mma_builder)",
                             "4.6.0")
SM120_N_FROM_8 = Rule("sm_120 takes tile N under 32: the block-scaled builder from 8 (before: 32), the epilogue a tile "
                      "N as narrow as the CTA's (before: always 32)", "4.6.0")
RULES = (SM120_RESERVES, SM120_MX_PTR_ARRAY, SM120_SFB_128, SM100_2SM_EPILOGUE_N, SM120_DENSE_PTR_ARRAY, SM120_N_FROM_8)


def _parts(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def since(version: str, first: str) -> bool:
    """Is ``version`` the release ``first`` or a later one (``since("4.4.1", "4.5.0")`` is False)?"""
    return _parts(version) >= _parts(first)


def has(version: str, rule: Rule) -> bool:
    """Does the release ``version`` follow ``rule``?"""
    return since(version, rule.first)


def rules_release(version: str) -> str:
    """The release whose rules ``version`` counts with: the newest release at or before it where a rule of
    RULES first appears (or the first placed, or CUTLASS_VERSION, which the model was read from), so 4.6.2
    counts as 4.6.0 and 4.4.3 as 4.4.2."""
    known = (FIRST, CUTLASS_VERSION, *(r.first for r in RULES))
    return max((release for release in known if since(version, release)), key=_parts)


def builders_of(version: str) -> str:
    """``CUTLASS 4.6.2's builders (4.6.0's rules)``: the release asked for, and the one whose rules count it."""
    used = rules_release(version)
    return f"CUTLASS {version}'s builders" + ("" if used == version else f" ({used}'s rules)")


def check_version(version: str) -> str:
    """``version`` where the model places it; any other is a UsageError listing the releases it knows."""
    if version not in CUTLASS_VERSIONS:
        raise UsageError(f"unknown --cutlass-version {version!r}: the model places {', '.join(CUTLASS_VERSIONS)}")
    return version
