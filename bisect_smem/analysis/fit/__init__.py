"""Would a kernel fit? Its shared memory against each architecture's or device's limits (targets), a
library's kernel counted in that library's own bytes (cutlass/, triton), and the static shared memory
of a compiled kernel read from its cubin or PTX (compiled)."""

FIT_SCHEMA = "bisect_smem/fit/v1"  # the schema id of what ``fit --json`` writes
