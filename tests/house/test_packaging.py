"""The wheel holds the whole package: every folder of bisect_smem with a module is a package that
pyproject.toml lists (setuptools installs only the packages named there, and an editable install hides a
missing one), and the package data the code reads is declared."""

from __future__ import annotations

import tomllib

from tests.paths import PACKAGE, ROOT


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed() -> None:
    # A folder of modules without __init__.py (the collector's fallback sitecustomize) is importable too, and
    # setuptools warns on every install about one that is not listed.
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("*.py")
               if "__pycache__" not in p.parts}
    listed = set(_setuptools()["packages"]) - set(_setuptools()["package-dir"])
    assert folders == listed


def test_the_files_read_at_run_time_are_package_data() -> None:
    data = _setuptools()["package-data"]
    assert data["bisect_smem.kernels"] == ["*.cu"] and any((ROOT / "kernels").glob("*.cu"))
    assert "*.json" in data["bisect_smem.schemas"]


def test_the_prebuilt_collectors_are_package_data_and_never_committed() -> None:
    from fnmatch import fnmatch

    from bisect_smem.devices.collector import build

    patterns = _setuptools()["package-data"]["bisect_smem.devices.collector"]
    for machine in build.PREBUILT_MACHINES:
        shipped = build.prebuilt_path(machine).relative_to(build.SOURCE_DIR).as_posix()
        assert any(fnmatch(shipped, pattern) for pattern in patterns), shipped
    # Build outputs (make wheel), not sources: git ignores the folder they are built into.
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert build.PREBUILT_DIR.relative_to(ROOT).as_posix() + "/" in ignored
