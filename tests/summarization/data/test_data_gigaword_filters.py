"""The Gigaword pair filters of Rush et al. (2015) and their use by the parallel reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from scg_summarize.data import BadInputReport, read_input
from scg_summarize.data.gigaword_filters import GigawordFilter
from scg_summarize.data.readers import ReaderConfig, read_parallel

PAIRS = [
    ("police arrested two men in paris on monday .", "two men arrested in paris"),  # kept
    ("the minister said on monday that he would resign .", "will the minister resign ?"),  # ?
    ("stocks fell sharply in tokyo on tuesday .", "markets : tokyo stocks fall"),  # :
    ("ministers gathered here for a conference .", "ministers gather for conference by julie bradford"),  # byline
    ("the company reported higher profits .", "urgent profits up at the company"),  # editing mark
    ("the company said it would hire more staff .", "it is the end of an era"),  # only stop words shared
]


def test_each_filter_by_hand() -> None:
    f = GigawordFilter()
    assert [f.reason(a, t) for a, t in PAIRS] == [
        None,
        "question_colon",
        "question_colon",
        "byline",
        "byline",
        "no_overlap",
    ]
    # digits mapped to # count as content words
    assert f.reason("he scored ## points", "## points for him") is None
    assert GigawordFilter(question_colon=False).reason(*PAIRS[2]) is None
    assert GigawordFilter.from_names(["byline"]) == GigawordFilter(no_overlap=False, byline=True, question_colon=False)
    assert GigawordFilter.from_names(["all"]) == GigawordFilter()
    with pytest.raises(ValueError, match="unknown Gigaword filter"):
        GigawordFilter.from_names(["bylines"])


def _write(tmp_path: Path) -> Path:
    (tmp_path / "train.article.txt").write_text("".join(a + "\n" for a, _ in PAIRS), encoding="utf-8")
    (tmp_path / "train.title.txt").write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    return tmp_path / "train"


def test_parallel_reader_drops_and_counts(tmp_path: Path) -> None:
    prefix = _write(tmp_path)
    report = BadInputReport()  # not skip_bad: filtering is no error
    kept = list(read_parallel(prefix, report=report, filters=GigawordFilter()))
    assert [e.references[0] for e in kept] == [PAIRS[0][1]]
    assert kept[0].id == "train:1"
    assert dict(report.skipped) == {"filtered_question_colon": 2, "filtered_byline": 2, "filtered_no_overlap": 1}
    # through the format dispatcher, one filter only
    report = BadInputReport()
    kept = list(read_input("parallel", prefix, ReaderConfig(gigaword_filters=("no_overlap",)), report=report))
    assert len(kept) == 5 and dict(report.skipped) == {"filtered_no_overlap": 1}
    assert len(list(read_parallel(prefix))) == len(PAIRS)  # off by default


def test_prepare_command_filters_and_records_the_counts(tmp_path: Path) -> None:
    from scg_summarize import cli
    from scg_summarize.data.storage import read_meta

    prefix = _write(tmp_path)
    out = tmp_path / "prepared"
    args = ["prepare", "--format", "parallel", "--input", f"train={prefix}", "--output", str(out), "--quiet"]
    assert cli.main([*args, "--gigaword-filter", "question_colon", "--gigaword-filter", "byline"]) == 0
    meta = read_meta(out)
    assert meta["splits"]["train"]["examples"] == 2
    assert meta["bad_input"]["skipped"] == {"filtered_question_colon": 2, "filtered_byline": 2}
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('{"source": "a b", "target": "a"}\n', encoding="utf-8")
    bad = [
        "prepare",
        "--format",
        "jsonl",
        "--input",
        f"train={jsonl}",
        "--output",
        str(tmp_path / "j"),
        "--gigaword-filter",
        "all",
        "--quiet",
    ]
    assert cli.main(bad) == 2
