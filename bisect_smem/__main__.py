"""Entry point for ``python -m bisect_smem``."""

import sys

from bisect_smem.cli import main

sys.exit(main())
