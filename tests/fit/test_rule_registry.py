"""fit's library rules behind one interface: a third library made the documented way (one folder,
tests/fit/toy/, and one registry line) gets its option, its answers in its own words (--verbose, --json,
--explain), its schema and its trace advice through the commands, and no module outside a library's
folder names that library."""

from __future__ import annotations

import ast
import inspect
import io
import json
import tokenize
from pathlib import Path

import pytest

from bisect_smem.analysis.fit import rules
from bisect_smem.analysis.fit.rules import RULES, gemm_schema
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.analysis.trace import explain, fit_advice
from bisect_smem.app.cli import main as cli
from bisect_smem.app.render.trace import render_text
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.trace_events import MAX_DYNAMIC_SHARED, AttributeSet, Launch, LaunchKind, Trace
from tests.fit.toy.rule import ToyRule
from tests.paths import PACKAGE

# What another library's words would be, were they printed for the toy's kernel.
OTHER_WORDS = ("CUTLASS", "Triton", "SharedStorage", "metadata.shared", "num_stages", "StageCount", "None")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyRule:
    rule = ToyRule()
    monkeypatch.setitem(RULES, rule.name, rule)  # the one registry line
    return rule


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args, "--no-local"])
    return code, capsys.readouterr().out


def test_json_carries_the_library_its_words_and_its_own_fields(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x64", "--rule", "toy", "--toy-depth", "3", "--arch", "sm_90", "--json", "-"],
                    capsys)
    data = json.loads(out)
    assert code == 0
    assert data["gemm"] == {"rule": "toy", "tiles": ["128x128x64"], "stages": "auto", "toy_depth": 3}
    assert data["source"] == "depth 3: Toy 0.1"
    result = data["results"][0]
    assert (result["library"], result["version"], result["launch_bytes"], result["total_bytes"]) == (
        "Toy", "0.1", 3 * 256 * 64, 3 * 256 * 64)
    assert result["details"] == {"copies": 6} and result["labels"]["launch"] == "toy bytes"


def test_verbose_speaks_the_librarys_words(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x64", "--rule", "toy", "--toy-depth", "3", "--arch", "sm_90", "--verbose"],
                    capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "depth 3 fits on sm_90: 49152 of 232448 B"
    assert lines[1] == "kernel: depth 3: Toy 0.1"
    assert lines[2].split() == ["tile", "target", "depth", "B/stage", "mainloop", "B", "epilogue", "B", "copies",
                                "toy", "bytes", "B", "opt-in", "limit", "B", "margin", "B"]
    assert lines[5:] == ["sm_90: 49152 B = ToyKernel::bytes (toy 0.1, 6 copies)", "    49152 B  tiles",
                         "  against the opt-in limit 232448 B: 183296 to spare"]
    assert not [word for word in OTHER_WORDS if word in out]


def test_over_the_limit_in_the_librarys_words(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x64", "--rule", "toy", "--toy-depth", "40", "--arch", "sm_120"], capsys)
    assert code == 1 and out.splitlines()[0] == ("depth 40 does not fit on sm_120: 655360 B against 101376 B, over "
                                                 "by 553984 B (ToyError)")


def test_a_registered_rules_options_are_its_own(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x64", "--toy-depth", "3", "--arch", "sm_90", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "error: --toy-depth is Toy's: add --rule toy or drop it"


def test_a_registered_rules_message_picks_its_tiles(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--explain", "toy wants 300000", "--tile", "64x64x64", "--arch", "sm_90"], capsys)
    assert code == 1 and "a toy note" in out.splitlines()
    assert "64x64x64 depth that fit" in out and not [word for word in OTHER_WORDS if word in out]


def test_a_byte_count_beside_its_tiles_is_said_in_its_words(toy: ToyRule, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--explain", "300000", "--rule", "toy", "--tile", "64x64x64", "--arch", "sm_90"], capsys)
    assert code == 1 and out.splitlines()[0] == "the kernel needs 300000 B of shared memory per block (Toy's tiles below)."
    assert not [word for word in OTHER_WORDS if word in out]


def test_the_schema_is_read_from_the_registry(toy: ToyRule) -> None:
    schema = gemm_schema()
    assert schema["properties"]["rule"] == {"enum": ["cutlass", "triton", "toy"]}
    assert schema["properties"]["toy_depth"] == {"type": "integer"}
    assert {"warps", "cutlass_version"} <= set(schema["properties"])


def test_a_traced_kernel_gets_its_librarys_advice(toy: ToyRule) -> None:
    h100 = find_profile("9.0")
    assert h100 is not None
    here = Target.from_profile(h100)
    name = "toy_gemm_64x64x64_d2"
    asked = AttributeSet((1,), "cuFuncSetAttribute", None, 1, MAX_DYNAMIC_SHARED, 16384, 0, "driver", 0, name)
    refused = Launch((1,), "cuLaunchKernel", 2, name, (1, 1, 1), (128, 1, 1), (0, 0, 0), 300000, 0, 1, "driver",
                     False, LaunchKind.LAUNCH, 1)
    explained = explain(Trace((), (asked,), (refused,), 0), here, [], lambda n: n, fit_advice)
    assert [r.fit for r in explained.requests] == [("fit (toy 0.1, depth 2):", "  16384 B, the same as asked"),
                                                   ("fit (toy 0.1, depth 2):", "  16384 B, not what was asked")]
    assert "    fit (toy 0.1, depth 2):" in render_text(explained).splitlines()
    assert fit_advice("toy_gemm_64x64", 16384, here) is None


def _library_folders() -> dict[str, Path]:
    """Each registered rule's folder: the package directly under analysis/fit that holds its class."""
    folders = {name: Path(inspect.getfile(type(rule))).parent for name, rule in RULES.items()}
    assert all(folder.parent == Path(rules.__file__).parent for folder in folders.values())
    return folders


def test_no_module_outside_a_librarys_folder_names_it() -> None:
    # An identifier (a field, function or class) or a string that is the library's name, anywhere in the
    # package but its own folder and the registry, is a branch on the library or a field only it fills.
    # The public face (api.py, and __init__.py naming its functions) offers each library's kernel by the name a
    # user would guess (fit_triton): it calls the registry and branches on no library itself.
    public = {PACKAGE / "api.py", PACKAGE / "__init__.py"}
    hits = []
    for name, folder in _library_folders().items():
        words = {RULES[name].name.lower(), RULES[name].library.lower()}
        for path in PACKAGE.rglob("*.py"):
            if folder in path.parents or path == Path(rules.__file__) or path in public:
                continue
            for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
                named = tok.type == tokenize.NAME and any(w in tok.string.lower() for w in words)
                said = tok.type == tokenize.STRING and _literal(tok.string).lower() in words
                if named or said:
                    hits.append(f"{path.relative_to(PACKAGE)}:{tok.start[0]}: {tok.string[:40]}")
    assert hits == []


def _literal(text: str) -> str:
    """A string token's value ('' for an f-string or bytes)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return ""
    return value if isinstance(value, str) else ""
