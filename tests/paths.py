"""Where the tests find the project and its committed data, wherever a test module sits."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bisect_smem"
DATA = ROOT / "tests" / "data"
H200_REPORT = DATA / "h200_report.json"  # a standard run on an H200 (cc 9.0, driver 580)
H200_FULL = DATA / "h200_full_report.json"  # a --level full run on the same H200
