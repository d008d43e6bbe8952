"""Readers (stories, JSON lines, parallel text) and their bad-input handling."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from scg_summarize.data.errors import BadInputReport, DataError
from scg_summarize.data.rawtext import iter_lines, read_text_file
from scg_summarize.data.readers import (
    ReaderConfig,
    parallel_paths,
    read_input,
    read_jsonl,
    read_parallel,
)
from scg_summarize.data.stories import find_story_files, parse_story, read_stories

from ..conftest import TOY_STORIES, StoryWriter


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- stories


def test_parse_story(write_story: StoryWriter) -> None:
    path = write_story("abc123", ["First para. Two sentences.", "Second para."], ["H one", "H two"])
    example = parse_story(path)
    assert example.id == "abc123"
    assert example.source == ["First para. Two sentences.", "Second para."]
    assert example.references == ["H one", "H two"]
    assert not example.sentences_given
    assert example.origin == str(path)


def test_story_highlight_wrapping_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "w.story"
    body = b"\xef\xbb\xbfArticle line\r\n\r\n@highlight\r\n\r\nfirst part\r\nsecond part\r\n"
    path.write_bytes(body)
    example = parse_story(path)
    assert example.source == ["Article line"]  # byte-order mark and \r removed
    assert example.references == ["first part second part"]


@pytest.mark.parametrize(
    ("body", "reason", "line"),
    [
        ("Just an article.\n\nNo highlights at all.\n", "missing_highlight", None),
        ("@highlight\n\nOnly a highlight\n", "empty_source", 1),
        ("", "empty_source", None),
        ("Article.\n\n@highlight\n\n@highlight\n\nSecond\n", "empty_highlight", 3),
        ("Article.\n\n@highlight\n\n", "empty_highlight", 3),
    ],
)
def test_malformed_stories(tmp_path: Path, body: str, reason: str, line: int | None) -> None:
    path = tmp_path / "bad.story"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as info:
        parse_story(path)
    assert info.value.reason == reason
    assert info.value.path == str(path)
    assert info.value.line == line
    assert str(path) in str(info.value)


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.story"
    path.write_bytes(b"Fine line\n\nCaf\xe9 au lait\n\n@highlight\n\nH\n")
    with pytest.raises(DataError, match=r"latin\.story:3: invalid UTF-8") as info:
        parse_story(path)
    assert info.value.reason == "invalid_utf8"


def test_story_directory_with_skip_bad(toy_story_dir: Path, write_story: StoryWriter) -> None:
    write_story("zz_bad", ["No highlight here."], [], directory=toy_story_dir / "sub")
    (toy_story_dir / "sub" / "zz_bad2.story").write_bytes(b"\xff\xfe\n@highlight\n\nH\n")
    with pytest.raises(DataError, match="zz_bad"):
        list(read_stories(toy_story_dir))
    report = BadInputReport(skip_bad=True)
    examples = list(read_stories(toy_story_dir, report=report))
    assert [e.id for e in examples] == [f"story{i}" for i in range(len(TOY_STORIES))]
    assert report.skipped == {"missing_highlight": 1, "invalid_utf8": 1}
    assert report.total_skipped == 2
    assert any("zz_bad2.story:1" in m for m in report.messages)
    assert "skipped 2 bad record(s)" in report.summary_lines("stories")[0]
    (toy_story_dir.parent / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.story files"):
        find_story_files(toy_story_dir.parent / "empty")
    with pytest.raises(DataError, match="no such file or directory"):
        find_story_files(toy_story_dir.parent / "missing")


# ----------------------------------------------------------------------------- line reader


def test_iter_lines_rejects_overlong_lines_and_continues(tmp_path: Path) -> None:
    path = tmp_path / "long.txt"
    path.write_text("short\n" + "x" * 500 + "\nafter\n" + "\u00e9" * 40 + "\n", encoding="utf-8")
    results = list(iter_lines(path, max_chars=50))
    assert results[0] == (1, "short")
    assert isinstance(results[1][1], DataError) and results[1][1].reason == "line_too_long"
    assert results[1][1].line == 2
    assert results[2] == (3, "after")
    assert results[3] == (4, "\u00e9" * 40)  # 80 bytes but 40 characters: allowed
    with pytest.raises(DataError, match=r"long\.txt:2"):
        read_text_file(path, max_chars=50)


def test_data_error_formatting_and_pickling() -> None:
    err = DataError("bad thing", "/x/y.jsonl", 7, reason="bad_json")
    assert str(err) == "/x/y.jsonl:7: bad thing [bad_json]"
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.line, again.reason, str(again)) == (err.path, 7, "bad_json", str(err))
    assert DataError("m").location == "<input>"


# ----------------------------------------------------------------------------- JSON lines


def test_jsonl_string_and_list_fields(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "d.jsonl",
        [
            json.dumps({"id": "a", "document": "Para one. More.\nPara two.", "summary": "S."}),
            "   ",
            json.dumps({"id": 5, "document": ["Sent one.", " ", "Sent two."], "summary": ["R1", "R2"]}),
        ],
    )
    config = ReaderConfig(source_field="document", target_field="summary")
    first, second = list(read_jsonl(path, config))
    assert first.id == "a" and first.source == ["Para one. More.", "Para two."]
    assert not first.sentences_given and first.references == ["S."]
    assert first.origin == f"{path}:1"
    assert second.id == "5" and second.sentences_given
    assert second.source == ["Sent one.", "Sent two."] and second.references == ["R1", "R2"]
    assert second.origin == f"{path}:3"


def test_cnndm_jsonl_export_splits_highlights(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "cnndm.jsonl",
        [json.dumps({"article": "Body text here.", "highlights": "First.\nSecond .\n"})],
    )
    (example,) = list(read_input("cnndm", path))
    assert example.references == ["First.", "Second ."]
    assert example.id == "cnndm:1"
    config = ReaderConfig(target_field="ref", target_sep=" . ")
    path2 = _write_lines(tmp_path / "f.jsonl", [json.dumps({"article": "B.", "ref": "a b . c d"})])
    assert next(read_input("cnndm", path2, config)).references == ["a b", "c d"]


@pytest.mark.parametrize(
    ("line", "reason", "message"),
    [
        ('{"source": "x", "target": ', "bad_json", "invalid JSON"),
        ("[1, 2]", "bad_json", "expected a JSON object"),
        ('{"source": "x"}', "missing_field", "missing field 'target'"),
        ('{"source": 3, "target": "t"}', "wrong_type", "must be a string or a list"),
        ('{"source": ["a", 1], "target": "t"}', "wrong_type", "must be a string or a list"),
        ('{"source": " \\n ", "target": "t"}', "empty_source", "empty source"),
        ('{"source": "s", "target": []}', "empty_target", "empty target"),
        ('{"source": "s", "target": "x \\udc80"}', "invalid_text", r"field 'target' holds an unpaired surrogate"),
        ('{"source": ["ok \\ud83d\\ude00", "\\uD800"], "target": "t"}', "invalid_text", "field 'source' holds"),
        ('{"source": "a", "target": "t", "source": "b"}', "bad_json", "the field 'source' appears twice"),
    ],
)
def test_jsonl_bad_records(tmp_path: Path, line: str, reason: str, message: str) -> None:
    good = json.dumps({"source": "fine", "target": "ok"})
    path = _write_lines(tmp_path / "bad.jsonl", [good, line, good])
    with pytest.raises(DataError, match=message) as info:
        list(read_jsonl(path))
    assert (info.value.reason, info.value.line) == (reason, 2)
    assert f"{path}:2" in str(info.value)
    report = BadInputReport(skip_bad=True)
    assert len(list(read_jsonl(path, report=report))) == 2
    assert report.skipped == {reason: 1}


def test_jsonl_invalid_utf8_and_long_lines(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    good = json.dumps({"source": "fine", "target": "ok"}).encode()
    path.write_bytes(good + b"\n" + b'{"source": "\xc3\x28"}\n' + good + b"\n" + b" " * 300 + b"\n")
    report = BadInputReport(skip_bad=True)
    config = ReaderConfig(max_line_chars=200)
    assert len(list(read_jsonl(path, config, report=report))) == 2
    assert report.skipped == {"invalid_utf8": 1, "line_too_long": 1}
    with pytest.raises(DataError, match=r"mixed\.jsonl:2"):
        list(read_jsonl(path, config))


# ----------------------------------------------------------------------------- parallel


def test_parallel_pairs_and_path_resolution(tmp_path: Path) -> None:
    _write_lines(tmp_path / "train.article.txt", ["a b c", "d e f"])
    _write_lines(tmp_path / "train.title.txt", ["t1", "t  2"])
    for spec in ("train", "train.article.txt", "train.title.txt"):
        assert parallel_paths(tmp_path / spec) == (
            tmp_path / "train.article.txt",
            tmp_path / "train.title.txt",
        )
    examples = list(read_parallel(tmp_path / "train"))
    assert [(e.id, e.source, e.references) for e in examples] == [
        ("train:1", ["a b c"], ["t1"]),
        ("train:2", ["d e f"], ["t 2"]),
    ]
    assert len(list(read_input("parallel", tmp_path / "train.article.txt"))) == 2


@pytest.mark.parametrize("longer", ["article", "title"])
def test_parallel_line_count_mismatch(tmp_path: Path, longer: str) -> None:
    lines = {"article": ["a1", "a2"], "title": ["t1", "t2"]}
    lines[longer] += ["extra1", "extra2"]
    for kind, content in lines.items():
        _write_lines(tmp_path / f"x.{kind}.txt", content)
    with pytest.raises(DataError, match="line count mismatch") as info:
        list(read_parallel(tmp_path / "x"))
    assert info.value.path == str(tmp_path / f"x.{longer}.txt")
    assert info.value.line == 3
    report = BadInputReport(skip_bad=True)
    assert len(list(read_parallel(tmp_path / "x", report=report))) == 2
    assert report.skipped == {"line_count_mismatch": 2}


def test_parallel_empty_lines_are_reported(tmp_path: Path) -> None:
    _write_lines(tmp_path / "y.article.txt", ["a", "", "c"])
    _write_lines(tmp_path / "y.title.txt", ["t", "u", " "])
    report = BadInputReport(skip_bad=True)
    assert [e.id for e in read_parallel(tmp_path / "y", report=report)] == ["y:1"]
    assert report.skipped == {"empty_source": 1, "empty_target": 1}
    with pytest.raises(DataError, match="no such file"):
        list(read_parallel(tmp_path / "missing"))


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown input format"):
        read_input("xml", "x")
