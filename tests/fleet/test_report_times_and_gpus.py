"""The two facts every fleet output reads off a report: when it was measured, as Unix seconds, and its
devices grouped by GPU (``--backend all`` lists a GPU once per backend, under one index)."""

from __future__ import annotations

import calendar
import dataclasses
from pathlib import Path

from bisect_smem.core.saved import load_report

REPORT = Path(__file__).resolve().parents[1] / "data" / "h200_report.json"


def test_created_seconds_with_and_without_a_zone():
    report = load_report(REPORT)
    utc = calendar.timegm((2025, 12, 1, 9, 39, 0))
    assert dataclasses.replace(report, created_utc="2025-12-01T09:39:00+00:00").created_unix_seconds == utc
    assert dataclasses.replace(report, created_utc="2025-12-01T09:39:00").created_unix_seconds == utc
    assert dataclasses.replace(report, created_utc="2025-12-01T11:39:00+02:00").created_unix_seconds == utc


def test_devices_grouped_by_gpu_in_order():
    report = load_report(REPORT)
    first = report.devices[0]
    second = dataclasses.replace(first, index=first.index + 1)
    numba = dataclasses.replace(first, backend="numba")
    grouped = dataclasses.replace(report, devices=(first, second, numba)).by_gpu()
    assert grouped == [(first, numba), (second,)]
