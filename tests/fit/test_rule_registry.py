"""fit's library rules behind one interface: a third library registered in the registry alone gets its
option, its answers, its JSON fields and its schema through the fit command, and no module names a
library to branch on it."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest

from bisect_smem.analysis.fit import rules
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.rules import RULES, gemm_schema
from bisect_smem.analysis.fit.targets import FitRequest, FitResult, Target, evaluate
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.app.cli import main as cli
from tests.paths import PACKAGE


@dataclass(frozen=True)
class ToyKernel:
    """A library whose kernel holds ``depth`` copies of an M x K and an N x K tile of one-byte elements."""

    m: int
    n: int
    k: int
    depth: int


class ToyRule:
    """A third library, as small as the interface allows."""

    name, library, version = "toy", "Toy", "0.1"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--toy-depth", metavar="N")

    def given(self, args: argparse.Namespace) -> list[str]:
        return ["--toy-depth"] if args.toy_depth is not None else []

    def kernels(self, args: argparse.Namespace, tiles: Sequence[Tile], dtype: str | None,
                stages: int | None) -> tuple[ToyKernel, ...]:
        return tuple(ToyKernel(t.m, t.n, t.k, int(args.toy_depth or 2)) for t in tiles)

    def evaluate(self, kernel: ToyKernel, request: FitRequest, target: Target) -> FitResult:
        total = kernel.depth * (kernel.m + kernel.n) * kernel.k
        return replace(evaluate(FitRequest(total, request.static_bytes, request.threads), target),
                       tile=f"{kernel.m}x{kernel.n}x{kernel.k}", stages=kernel.depth, shared_storage_bytes=total,
                       builds=True, parts=[["tiles", total]])

    def describe(self, kernels: Sequence[ToyKernel], stages: int | None) -> str:
        return f"depth {kernels[0].depth}: Toy {self.version}"

    def json_fields(self, kernels: Sequence[ToyKernel], stages: int | None) -> dict[str, Any]:
        return {"toy_depth": kernels[0].depth}

    def json_properties(self) -> dict[str, Any]:
        return {"toy_depth": {"type": "integer"}}

    def parse_message(self, text: str) -> Explained | None:
        found = re.search(r"toy wants (\d+)", text)
        return Explained(self.name, int(found.group(1)), None, ()) if found else None

    def explain_notes(self, kernels: Sequence[ToyKernel], explained: Explained,
                      results: Sequence[FitResult]) -> tuple[str, ...]:
        return ("a toy note",) if explained.kind == self.name else ()


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyRule:
    rule = ToyRule()
    monkeypatch.setitem(RULES, rule.name, rule)
    return rule


def test_a_registered_rule_answers_through_the_command(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x64", "--rule", "toy", "--toy-depth", "3", "--arch", "sm_90",
                     "--no-local", "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["gemm"] == {"rule": "toy", "tiles": ["128x128x64"], "stages": "auto", "toy_depth": 3}
    assert data["source"] == "depth 3: Toy 0.1"
    assert data["results"][0]["shared_storage_bytes"] == 3 * 256 * 64


def test_a_registered_rules_options_are_its_own(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x64", "--toy-depth", "3", "--arch", "sm_90", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "error: --toy-depth is Toy's: add --rule toy or drop it"


def test_a_registered_rules_message_picks_its_tiles(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--explain", "toy wants 300000", "--tile", "64x64x64", "--arch", "sm_90", "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and "a toy note" in out.splitlines()


def test_the_schema_is_read_from_the_registry(toy: ToyRule) -> None:
    schema = gemm_schema()
    assert schema["properties"]["rule"] == {"enum": ["cutlass", "triton", "toy"]}
    assert schema["properties"]["toy_depth"] == {"type": "integer"}
    assert {"warps", "cutlass_version"} <= set(schema["properties"])


def test_no_module_branches_on_a_library_name() -> None:
    names = "|".join(rules.RULES)
    pattern = re.compile(rf"""(==|!=)\s*["'](?:{names})["']|["'](?:{names})["']\s*(==|!=)""")
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in PACKAGE.rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
