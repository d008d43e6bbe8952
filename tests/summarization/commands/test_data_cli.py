"""The ``scg-summarize`` command line: usage errors and the ``prepare`` subcommand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize import cli
from scg_summarize.commands._prepare_args import parse_input_spec
from scg_summarize.data.storage import read_meta

from ..conftest import TOY_STORIES


def test_prepare_synthetic(tmp_path: Path) -> None:
    out = tmp_path / "syn"
    args = ["prepare", "--format", "synthetic", "--output", str(out), "--n-train", "30"]
    assert cli.main([*args, "--n-valid", "5", "--n-test", "5", "--quiet"]) == 0
    meta = read_meta(out)
    assert meta["splits"]["train"]["examples"] == 30
    assert (meta["options"]["num_chunks"], meta["options"]["chunk_len"]) == (8, 16)
    assert cli.main([*args, "--quiet"]) == 2  # exists, no --overwrite


def test_prepare_stories_with_bad_input(
    toy_story_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (toy_story_dir / "broken.story").write_text("no highlights\n", encoding="utf-8")
    base = ["prepare", "--format", "cnndm", "--input", f"train={toy_story_dir}", "--quiet"]
    base += ["--chunks", "2", "--chunk-len", "6"]
    assert cli.main([*base, "--output", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "broken.story" in err and "missing_highlight" in err and "--skip-bad" in err
    assert cli.main([*base, "--output", str(tmp_path / "b"), "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 bad record(s)" in err and "missing_highlight: 1" in err
    meta = read_meta(tmp_path / "b")
    assert meta["bad_input"]["skipped"] == {"missing_highlight": 1}
    assert meta["splits"]["train"]["examples"] == len(TOY_STORIES)
    assert meta["source_format"] == "cnndm" and meta["options"]["chunk_len"] == 6


def test_an_input_that_is_not_a_file_is_named_without_the_skip_bad_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory given for a JSON Lines file, and a missing file: said as such, and no hint to
    ``--skip-bad``, which skips bad records, not inputs."""
    (tmp_path / "folder").mkdir()
    for given, said in (("folder", "is a directory, not a file"), ("missing.jsonl", "no such file")):
        args = ["prepare", "--format", "jsonl", "--input", f"train={tmp_path / given}", "--quiet"]
        assert cli.main([*args, "--output", str(tmp_path / "new" / f"out-{given}")]) == 2
        err = capsys.readouterr().err
        assert f"{given}: {said}" in err and "--skip-bad" not in err, err
        assert not (tmp_path / "new").exists()  # (the folders the lock made, parents included, removed)


@pytest.mark.parametrize(
    ("fmt", "given", "said"),
    [
        (
            "synthetic",
            ["--vocab", "v.txt"],
            "--vocab does not apply to --format synthetic (only to cnndm, jsonl, parallel)",
        ),
        ("synthetic", ["--limit", "3"], "--limit does not apply to --format synthetic"),
        ("synthetic", ["--no-lowercase"], "--no-lowercase does not apply to --format synthetic"),
        ("jsonl", ["--n-train", "5"], "--n-train does not apply to --format jsonl (only to synthetic)"),
        (
            "parallel",
            ["--source-field", "doc"],
            "--source-field does not apply to --format parallel (only to cnndm, jsonl)",
        ),
        (
            "jsonl",
            ["--gigaword-filter", "all"],
            "--gigaword-filter does not apply to --format jsonl (only to parallel)",
        ),
    ],
)
def test_an_option_the_format_does_not_read_is_refused(
    fmt: str, given: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--format synthetic --vocab FILE`` wrote a corpus with its own vocabulary and a meta.json
    saying ``vocab_from: train``: every option only some formats read was accepted by the others."""
    inputs = [] if fmt == "synthetic" else ["--input", f"train={tmp_path / 'in.txt'}"]
    out = tmp_path / "out"
    assert cli.main(["prepare", "--format", fmt, *inputs, *given, "--output", str(out), "--quiet"]) == 2
    assert said in capsys.readouterr().err and not out.exists()


def test_a_failed_prepare_leaves_nothing_behind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad record stopped prepare with its split half written, which the next prepare (with
    --skip-bad) then refused as the user's file."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"source": "fine words .", "target": "ok"}\n{"source": 3, "target": "t"}\n', encoding="utf-8")
    args = ["prepare", "--format", "jsonl", "--input", f"train={data}", "--output", str(tmp_path / "o"), "--quiet"]
    assert cli.main(args) == 2 and not (tmp_path / "o").exists()  # (the folder its lock made, removed again)
    (tmp_path / "o").mkdir()  # a folder of the user's stays, empty or not
    assert cli.main(args) == 2 and (tmp_path / "o").is_dir() and not list((tmp_path / "o").iterdir())
    (tmp_path / "o" / "notes.txt").write_text("mine")  # and a file of the user's in it
    assert cli.main(args) == 2 and sorted(p.name for p in (tmp_path / "o").iterdir()) == ["notes.txt"]
    assert cli.main([*args, "--skip-bad"]) == 0
    assert read_meta(tmp_path / "o")["splits"]["train"]["examples"] == 1


def test_a_vocabulary_without_words_and_a_missing_vocab_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--min-freq`` above every count wrote a corpus of special tokens that no later command
    could use (exit 0); a missing ``--vocab`` was a bare ``[Errno 2]``."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"source": "fine words .", "target": "ok"}\n' * 3, encoding="utf-8")
    args = ["prepare", "--format", "jsonl", "--input", f"train={data}", "--output", str(tmp_path / "o"), "--quiet"]
    assert cli.main([*args, "--min-freq", "100"]) == 2
    err = capsys.readouterr().err
    assert "--min-freq 100: no word of train occurs that often (the most frequent occurs 3 times)" in err
    assert not (tmp_path / "o" / "meta.json").exists()
    assert cli.main([*args, "--vocab", str(tmp_path / "nope.txt")]) == 2
    assert f"--vocab {tmp_path / 'nope.txt'}: no such file" in capsys.readouterr().err


def test_prepare_jsonl_fields_and_reused_vocab(tmp_path: Path) -> None:
    rows = [{"doc": ["First sentence.", "Second one."], "refs": ["r one", "r two"]}] * 3
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    common = ["prepare", "--format", "jsonl", "--source-field", "doc", "--target-field", "refs"]
    common += ["--layout", "sentences", "--quiet"]
    assert cli.main([*common, "--input", f"train={data}", "--output", str(tmp_path / "a")]) == 0
    vocab = tmp_path / "a" / "vocab.txt"
    out_b = str(tmp_path / "b")
    assert cli.main([*common, "--input", f"test={data}", "--output", out_b, "--vocab", str(vocab)]) == 0
    assert (tmp_path / "b" / "vocab.txt").read_text() == vocab.read_text()
    assert read_meta(tmp_path / "b")["vocab_from"] == "given"
    assert cli.main([*common, "--input", "train=/no/such.jsonl", "--output", out_b]) == 2


def test_usage_errors_do_not_raise(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["bogus"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert cli.main(["prepare", "--format", "cnndm", "--output", "x"]) == 2
    assert cli.main(["prepare", "--output", "x"]) == 2  # argparse: --format missing
    capsys.readouterr()
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("scg-summarize ")
    assert cli.main(["--help"]) == 0
    assert "prepare" in capsys.readouterr().out


def test_parse_input_spec() -> None:
    assert parse_input_spec("valid=dev.jsonl") == ("valid", Path("dev.jsonl"))
    assert parse_input_spec("data/x.jsonl") == (None, Path("data/x.jsonl"))
    assert parse_input_spec("dir/a=b.jsonl") == (None, Path("dir/a=b.jsonl"))


def test_fractions_with_only_named_inputs_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --valid-fraction splits unnamed inputs only; with every input named it used to do nothing, silently
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"article": "word{i} a b c. d e.", "highlights": "word{i} a"}}\n' for i in range(20)))
    common = [
        "prepare",
        "--format",
        "jsonl",
        "--source-field",
        "article",
        "--target-field",
        "highlights",
        "--quiet",
        "--valid-fraction",
        "0.2",
    ]
    assert cli.main([*common, "--input", f"train={data}", "--output", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--valid-fraction splits only inputs given without a split name" in err and "train=" in err
    assert not (tmp_path / "a").exists()
    assert cli.main([*common, "--input", str(data), "--output", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "valid").is_dir()


def test_a_misspelt_split_name_is_refused_and_a_split_of_its_own_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``trian=x.jsonl`` made a split named trian: prepare succeeded, and train then found no
    training split (and the vocabulary was counted on every split). A near miss of train, valid
    or test is refused before any work, naming the input; another name is a split of its own."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"source": "fine words .", "target": "ok"}\n', encoding="utf-8")
    base = ["prepare", "--format", "jsonl", "--quiet"]
    for given, meant in (("trian", "train"), ("vaild", "valid"), ("tests", "test")):
        out = tmp_path / f"o-{given}"
        assert cli.main([*base, "--input", f"{given}={data}", "--output", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"split {given!r} looks like a misspelling of {meant!r}" in err, err
        assert f"--input {meant}={data}" in err and not out.exists(), err
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"source": "other words .", "target": "ok"}\n', encoding="utf-8")
    out = tmp_path / "o-dev"
    assert cli.main([*base, "--input", f"train={data}", "--input", f"dev={dev}", "--output", str(out)]) == 0
    assert set(read_meta(out)["splits"]) == {"train", "dev"}
