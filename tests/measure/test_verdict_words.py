"""Verdicts, statuses, results and probe outcome classes are enums whose values are the words reports have
always written: a row built from a word holds its member, writes the same word, and refuses a word that is
no verdict; the sticky outcome classes are members, not strings."""

from __future__ import annotations

import json

import pytest

from bisect_smem.core.errors import ProbeFault
from bisect_smem.core.jsonable import dumps, to_jsonable
from bisect_smem.core.outcomes import STICKY, TOO_BIG, Outcome
from bisect_smem.core.rows import VERDICT_KINDS, VERDICTS, Conclusion, Verdict, VerdictKind
from bisect_smem.core.status import STATUSES, DeviceSummary, RunResult, Status, result_for

# The words a report's JSON and text have always used (docs/outputs.md): they must not change.
REPORT_WORDS = {Conclusion: ["match", "MISMATCH", "differs", "info", "ERROR"],
                VerdictKind: ["limit", "prediction", "reference"], Status: ["pass", "fail", "incomplete"],
                RunResult: ["pass", "fail", "bad_input", "no_gpu", "incomplete"]}


@pytest.mark.parametrize("enum", REPORT_WORDS, ids=lambda e: e.__name__)
def test_each_enum_is_the_words_reports_write(enum: type) -> None:
    assert [member.value for member in enum] == REPORT_WORDS[enum]
    assert [f"{member}" for member in enum] == REPORT_WORDS[enum]  # as text shows them
    assert json.loads(json.dumps(list(enum))) == REPORT_WORDS[enum]


def test_the_published_lists_are_the_enums() -> None:
    assert (list(VERDICTS), list(VERDICT_KINDS), list(STATUSES)) == (list(Conclusion), list(VerdictKind), list(Status))


@pytest.mark.parametrize("word", REPORT_WORDS[Conclusion])
def test_a_row_built_from_a_word_holds_its_member_and_writes_the_word(word: str) -> None:
    row = Verdict("opt-in ceiling", 1024, "driver", 1024, word, kind="prediction")
    assert row.verdict is Conclusion(word) and row.kind is VerdictKind.PREDICTION
    assert json.loads(dumps(to_jsonable(row)))["verdict"] == word


def test_a_word_that_is_no_verdict_is_refused() -> None:
    with pytest.raises(ValueError, match=r"verdict must be one of match, MISMATCH, differs, info, ERROR \(got 'OK'\)"):
        Verdict("opt-in ceiling", 1024, "driver", 1024, "OK")
    with pytest.raises(ValueError, match=r"status must be one of pass, fail, incomplete \(got 'ok'\)"):
        DeviceSummary("ok")


def test_a_status_and_a_result_are_members() -> None:
    assert DeviceSummary("fail").status is Status.FAIL
    assert result_for(0) is RunResult.PASS and result_for(4) is RunResult.INCOMPLETE


@pytest.mark.parametrize("outcome", list(Outcome), ids=str)
def test_only_the_sticky_classes_make_a_sticky_fault(outcome: Outcome) -> None:
    fault = ProbeFault("opt-in launch of 232449 B", outcome, "detail")
    assert fault.sticky is (outcome in (Outcome.ILLEGAL_ADDRESS, Outcome.TIMEOUT))
    assert f"unexpected {outcome.value} (detail)" in str(fault)


def test_no_class_is_both_too_big_and_sticky() -> None:
    assert not TOO_BIG & STICKY and Outcome.OK not in TOO_BIG | STICKY
