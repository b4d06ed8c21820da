"""Entry point for ``python -m bisect_smem``."""

import os
import sys

from bisect_smem.app.cli.entry import main

code = main()
# Everything is written by now (files before stdout, and main flushed stdout): leave without tearing the
# interpreter down, which takes longer than writing a one-device report does.
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass  # a closed or broken stream: main has said so already, and the exit code stands
os._exit(code)
