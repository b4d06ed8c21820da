"""`fit`'s numbers as a hostile user types them: thousands of digits, other scripts' digits, hexadecimal
and underscores, infinity, an empty type, and Triton messages no GPU could print. Each is one
``error:`` line and exit 2, never a traceback."""

from __future__ import annotations

import pytest

from bisect_smem.app.cli import main as cli

HUGE = "1" * 4301  # past Python's int() limit of 4300 digits
ARABIC_TEN = "\u0661\u0660"  # Arabic-Indic digits one, zero


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = cli.main(["fit", *args, "--no-local", "--arch", "9.0"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("args", [
    [HUGE], ["--dynamic", HUGE, "--ptx", "k.ptx"], ["100", "--static", HUGE], ["--explain", HUGE],
    ["--explain", f"Required: {HUGE}, Hardware limit: 101376"],
    ["--explain", f"Required: 131072, Hardware limit: {HUGE}"],
    ["--tile", "128x128x64", "--epilogue", HUGE], ["100", "--threads", HUGE],
    ["--tile", "128x128x64", "--rule", "triton", "--warps", HUGE],
])
def test_thousands_of_digits_are_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(args, capsys)
    assert "characters)" in err and len(err) < 400  # the value is quoted cut short, with its length


@pytest.mark.parametrize("args", [
    [ARABIC_TEN], ["\u00b2"], ["100", "--static", "\u00b9\u2076"], ["--explain", f"Required: {ARABIC_TEN}00000, "
                                                                                "Hardware limit: 101376"],
    ["--explain", "Required: 131072, Hardware limit: \u00b9\u2070\u2070"], ["100", "--threads", ARABIC_TEN],
])
def test_digits_of_other_scripts_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    refused(args, capsys)


@pytest.mark.parametrize("text", ["0x10", "1_0", "inf", "nan", "1e3", "+5"])
@pytest.mark.parametrize("option", ["BYTES", "--static", "--epilogue", "--threads"])
def test_sizes_are_plain_decimal(option: str, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"BYTES": [text], "--static": ["100", "--static", text], "--threads": ["100", "--threads", text],
            "--epilogue": ["--tile", "128x128x64", "--epilogue", text]}[option]
    err = refused(args, capsys)
    assert repr(text) in err


@pytest.mark.parametrize("message, named", [
    ("Required: 0, Hardware limit: 0", "Hardware limit must be >= 49152 B"),
    ("Required: 5, Hardware limit: 101376", "Required (5 B) must be more than the Hardware limit"),
    ("Required: 99999999999999999999, Hardware limit: 101376", "--explain's Required must be <= 4294967296 B"),
    ("Required: 131072, Hardware limit: 99999999999999999999", "--explain's Hardware limit must be <= 4294967296 B"),
])
def test_impossible_triton_messages_name_the_wrong_number(message: str, named: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["--explain", message], capsys)
    assert named in err, err


@pytest.mark.parametrize("args, message", [
    (["--tile", "128x128x64", "--dtype", ""], "--dtype is empty"),
    (["--tile", "128x128x64", "--dtype", "  "], "--dtype is empty"),
    (["--tile", "128x128x64", "--dtype", "fp5"], "unknown --dtype 'fp5'"),
    (["--tile", "128x128x64", "--rule", "triton", "--dtype", ""], "--dtype is empty"),
])
def test_a_type_is_named_by_the_option_given(args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert message in refused(args, capsys)
