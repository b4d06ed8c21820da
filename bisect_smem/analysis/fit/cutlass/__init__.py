"""CUTLASS's shared storage, family by family, as the library's collective builders compute it: the
stage count ``StageCountAutoCarveout`` picks (or a fixed ``StageCount<N>``), each ``SharedStorage``'s
size and ``GemmKernel::SharedStorageSize``. The rules were read from CUTLASS_VERSION and are checked
byte for byte against real builds of it (tests/data/cutlass_truth.json)."""

CUTLASS_VERSION = "4.7.0"
