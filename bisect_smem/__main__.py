"""Entry point for ``python -m bisect_smem``."""

import sys

from bisect_smem.app.cli import main

sys.exit(main())
