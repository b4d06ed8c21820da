"""CUTLASS's shared storage, family by family, as the library's collective builders compute it: the
stage count ``StageCountAutoCarveout`` picks (or a fixed ``StageCount<N>``), each ``SharedStorage``'s
size and ``GemmKernel::SharedStorageSize``. The rules were read from CUTLASS_VERSION and are checked
byte for byte against real builds of it (tests/data/cutlass_truth.json)."""

LIBRARY = "CUTLASS"  # as a person names it
CUTLASS_VERSION = "4.7.0"  # the default release, whose builds tests/data/cutlass_truth.json holds
# The releases --cutlass-version takes: each one's rules differ from the next where a family says so
# (since()), and builds of each are committed (tests/data/cutlass_truth_moe_<version>.json).
CUTLASS_VERSIONS = ("4.4.1", "4.5.0", "4.7.0")


def since(version: str, first: str) -> bool:
    """Is ``version`` the release ``first`` or a later one (``since("4.4.1", "4.5.0")`` is False)?"""
    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))
    return parts(version) >= parts(first)
