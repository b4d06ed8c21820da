"""The leftover writer, run as its own process by experiments/validation.py:
``python -m bisect_smem.experiments.leftover_writer REQUEST_JSON``.

It opens the device anew (a new CUDA context), fills the dynamic shared memory of one block per SM with
a nonce's pattern, writes what ran to the request's ``out`` file, and exits, ending its context.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bisect_smem.experiments.validation import write_leftovers


def main(argv: list[str]) -> int:
    """Write the pattern and record the outcome; an exception's traceback on stderr is the failure."""
    request = json.loads(argv[0])
    outcome = write_leftovers(request)
    Path(request["out"]).write_text(json.dumps({"outcome": outcome.outcome.value, "detail": outcome.detail,
                                                "sm_ids": list(outcome.sm_ids), "words": outcome.words}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
