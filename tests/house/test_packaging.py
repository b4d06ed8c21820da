"""The wheel holds the whole package: every folder of bisect_smem with an __init__.py is a package that
pyproject.toml lists (setuptools installs only the packages named there, and an editable install hides a
missing one), and the package data the code reads is declared."""

from __future__ import annotations

import tomllib

from tests.paths import PACKAGE, ROOT


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed() -> None:
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    listed = set(_setuptools()["packages"]) - set(_setuptools()["package-dir"])
    assert folders == listed


def test_the_files_read_at_run_time_are_package_data() -> None:
    data = _setuptools()["package-data"]
    assert data["bisect_smem.kernels"] == ["*.cu"] and any((ROOT / "kernels").glob("*.cu"))
    assert "*.json" in data["bisect_smem.schemas"]
