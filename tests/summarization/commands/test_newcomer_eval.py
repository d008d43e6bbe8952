"""Issue 18, evaluation side: results never lost, safe decoding defaults from one place.

Cases: (1) ``report`` keeps results on other data sets, splits and settings; (5) the decoding
defaults are the documented settings everywhere; (6) evaluating twice with other options keeps
both results; (7) ``baseline --method lead3`` writes ``lead3-*``; (8) a corpus prepared another
way is evaluated with a warning; (12) the fraction read per generated word next to the union.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from scg_summarize import cli
from scg_summarize.commands._decoding_args import add_decode_arguments, decode_options, describe_sources, given_options
from scg_summarize.decoding import DecodeOptions
from scg_summarize.evaluation import AttentionMetrics, fraction_read, fraction_read_per_step, runner
from scg_summarize.evaluation.report import make_result, markdown_report, select_results
from scg_summarize.train.config import EvalConfig
from scg_summarize.train.config_loading import load_config

from ..eval_support import REPO_ROOT, ToySetup, make_toy_setup

DOCUMENTED = {
    "beam_size": 4,
    "greedy": False,
    "min_len": 10,
    "max_len": 40,
    "no_repeat_ngram": 3,
    "unk": "replace",
    "length_penalty": 1.0,
    "no_repeat_word": False,
    "block_digits": False,
}


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def toy_source(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("toy"), n_test=6)


@pytest.fixture
def toy(toy_source: ToySetup, tmp_path: Path) -> ToySetup:
    """The module's toy corpus (read-only) and a copy of its run (the tests write evaluations into it)."""
    return ToySetup(toy_source.data, shutil.copytree(toy_source.run, tmp_path / "run"))


def _fields(options: DecodeOptions) -> dict[str, object]:
    return {key: getattr(options, key) for key in DOCUMENTED}


# ----------------------------------------------------------------------------- (5) defaults
def test_decoding_defaults_are_the_documented_settings_everywhere() -> None:
    assert _fields(DecodeOptions()) == DOCUMENTED
    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    assert _fields(decode_options(parser.parse_args([]))) == DOCUMENTED  # command line, no flags
    assert _fields(EvalConfig().decode) == DOCUMENTED  # a run's [eval] table
    for name in ("small-C2F+MULTI2", "C2F", "STANDARD"):  # the shipped configurations keep them
        assert _fields(load_config(name).eval.decode) == DOCUMENTED, name


def test_the_docs_state_the_same_defaults() -> None:
    text = (REPO_ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    d = DecodeOptions()
    assert f"`--beam K` ({d.beam_size})" in text
    assert f"`--max-len` ({d.max_len}), `--min-len` ({d.min_len})" in text
    assert f"`--no-repeat-ngram N` ({d.no_repeat_ngram})" in text
    assert f"(default `{d.unk}`)" in text


def test_precedence_command_line_over_run_over_defaults() -> None:
    run_table = {"greedy": True, "max_len": 30, "min_len": 0, "no_repeat_ngram": 0, "unk": "forbid", "batch_size": 8}
    run = DecodeOptions.from_eval_table(run_table)
    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    options = decode_options(parser.parse_args([]), run)
    assert options.greedy and options.max_len == 30 and options.unk == "forbid"
    assert "the run's [eval] table: --greedy --max-len --min-len --no-repeat-ngram --unk" in describe_sources(
        options, {}, run
    )
    args = parser.parse_args(["--beam", "3", "--unk", "replace"])
    options = decode_options(args, run)  # an explicit --beam turns the run's greedy search off
    assert not options.greedy and options.beam_size == 3 and options.unk == "replace" and options.max_len == 30
    assert describe_sources(options, given_options(args), run).startswith("command line: --beam --unk;")
    assert DecodeOptions(max_len=6).min_len == 1  # the default minimum never exceeds a quarter of max_len
    with pytest.raises(ValueError, match="min_len"):
        DecodeOptions(max_len=6, min_len=8)  # an explicit contradiction is refused


def test_evaluate_without_options_uses_the_documented_settings(toy: ToySetup, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli.main(["evaluate", "--run", str(toy.run), "--limit", "1", "--quiet"]) == 0
    assert "decoding with beam 4, 10-40 words, no repeated 3-grams, <unk> replace" in capsys.readouterr().err
    (path,) = (toy.run / "eval").glob("*.json")
    result = json.loads(path.read_text())
    assert {k: result["decode_options"][k] for k in DOCUMENTED} == DOCUMENTED
    assert path.name == "data-test.beam4-len10-40-ngram3-unkreplace-first1.json"


def test_recombine_on_a_model_it_is_not_exact_for_is_a_clear_error(toy: ToySetup, capsys) -> None:  # type: ignore[no-untyped-def]
    for command in ("evaluate", "summarize"):
        assert cli.main([command, "--run", str(toy.run), "--limit", "1", "--quiet", "--recombine"]) == 2
        assert "--recombine merges hypotheses that end in the same C words" in capsys.readouterr().err


# ----------------------------------------------------------------------------- (6) twice
def _not_called(*args: object, **kwargs: object) -> None:
    raise AssertionError("evaluate decoded a split whose result it cannot write")


def test_evaluating_twice_with_other_options_keeps_both(toy: ToySetup, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    base = ["evaluate", "--run", str(toy.run), "--limit", "1", "--quiet", "--max-len", "8"]
    assert cli.main([*base, "--beam", "2"]) == 0
    assert cli.main([*base, "--greedy"]) == 0
    files = sorted(p.name for p in (toy.run / "eval").glob("*.json"))
    assert files == [
        "data-test.beam2-len2-8-ngram3-unkreplace-first1.json",
        "data-test.greedy-len2-8-ngram3-unkreplace-first1.json",
    ]
    first = toy.run / "eval" / files[0]
    before = first.read_text()
    # the same file name for other settings (an explicit --output) is refused before anything is decoded, the
    # file kept
    with monkeypatch.context() as patched:
        patched.setattr(runner, "evaluate_model", _not_called)
        assert cli.main([*base, "--greedy", "--output", str(first)]) == 2
    assert "holds a result with other settings" in capsys.readouterr().err
    assert first.read_text() == before
    assert cli.main([*base, "--beam", "2"]) == 0  # the same settings again: a re-run replaces it
    assert cli.main([*base, "--greedy", "--output", str(first), "--overwrite"]) == 0
    assert json.loads(first.read_text())["decode_options"]["greedy"] is True


def test_evaluate_never_writes_over_a_folder_or_the_user_s_summaries(  # type: ignore[no-untyped-def]
    toy: ToySetup, tmp_path: Path, capsys
) -> None:
    """--output DIR (a traceback before), a path under a file, and X.json beside a
    X.summaries.jsonl the result does not own (silently replaced before) are refused up front."""
    base = ["evaluate", "--run", str(toy.run), "--limit", "1", "--quiet", "--max-len", "8", "--greedy"]
    (tmp_path / "d").mkdir()
    for extra in ((), ("--overwrite",)):
        assert cli.main([*base, "--output", str(tmp_path / "d"), *extra]) == 2
        assert f"{tmp_path / 'd'}: a directory; expected the path of a result file" in capsys.readouterr().err
    (tmp_path / "f").write_text("x")
    assert cli.main([*base, "--output", str(tmp_path / "f" / "x.json")]) == 2
    assert f"{tmp_path / 'f'} is a file, not a folder" in capsys.readouterr().err
    mine = tmp_path / "mine.summaries.jsonl"
    mine.write_text("my summaries\n")
    assert cli.main([*base, "--output", str(tmp_path / "mine.json")]) == 2
    assert f"--output {mine}: it exists; pass --overwrite" in capsys.readouterr().err
    assert mine.read_text() == "my summaries\n" and not (tmp_path / "mine.json").exists()
    assert cli.main([*base, "--output", str(tmp_path / "mine.json"), "--overwrite"]) == 0
    assert mine.read_text() != "my summaries\n"
    assert cli.main([*base, "--output", str(tmp_path / "mine.json")]) == 0  # its own summaries: a re-run


def test_a_checkpoint_of_another_run_is_refused(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The result of ``--checkpoint`` is filed under ``--run`` with its training record and decoding
    defaults: a checkpoint of another configuration was used silently."""
    other = shutil.copytree(toy.run, tmp_path / "other")
    stored = torch.load(other / "best.pt", weights_only=False)
    stored["config"]["name"] = "another-config"
    stored["config"]["model"]["dropout"] = 0.5
    torch.save(stored, other / "best.pt")
    base = ["evaluate", "--run", str(toy.run), "--limit", "1", "--quiet", "--max-len", "8"]
    assert cli.main([*base, "--checkpoint", str(other / "best.pt")]) == 2
    err = capsys.readouterr().err
    assert f"{other / 'best.pt'}: a checkpoint of another configuration than the run {toy.run}" in err
    assert "'another-config' against" in err and "name and model differ" in err
    assert cli.main([*base, "--checkpoint", str(toy.run / "best.pt")]) == 0  # its own


# ----------------------------------------------------------------------------- (7) lead3
def test_baseline_file_names_are_the_method_names(toy: ToySetup, tmp_path: Path) -> None:
    out = tmp_path / "baselines"
    common = ["baseline", "--data", str(toy.data), "--output-dir", str(out), "--quiet"]
    assert cli.main([*common, "--method", "lead3", "--summaries"]) == 0
    assert cli.main([*common, "--method", "lead3", "--k", "2"]) == 0
    assert cli.main([*common, "--method", "first", "--refs", "first"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "first-data-test.refs-first.json",
        "lead3-data-test.json",
        "lead3-data-test.summaries.jsonl",
        "lead3-k2-data-test.json",
    ]


# ----------------------------------------------------------------------------- (1) report
def _result(
    name: str,
    split: str,
    data: str = "/d/cnndm",
    run: str = "/runs/a",
    beam: int = 4,
    created: str = "2026-01-01T00:00:00",
    r1: float = 30.0,
) -> dict[str, object]:
    record = make_result(
        "model",
        name,
        {"rouge1": r1, "rouge2": 10.0, "rougeL": 20.0},
        data=data,
        split=split,
        examples=10,
        run=run,
        decode_options={"beam_size": beam},
    )
    record["created"] = created
    return record


def test_report_keeps_results_on_every_split_data_set_and_setting() -> None:
    records = [
        _result("C2F", "test", r1=31.0),
        _result("C2F", "valid", r1=32.0),
        _result("C2F", "test", data="/d/scitldr", r1=33.0),
        _result("C2F", "test", beam=1, r1=34.0),
        _result("C2F", "test", data="/other/cnndm", r1=35.0),
    ]
    kept, superseded = select_results(records)
    assert len(kept) == 5 and not superseded
    text = markdown_report(records)
    for r1 in ("31.00", "32.00", "33.00", "34.00", "35.00"):
        assert f"| {r1} |" in text, r1  # no result dropped
    assert "## /d/cnndm / test" in text and "## /other/cnndm / test" in text  # same folder name: full paths
    assert "| C2F [beam=4] |" in text and "| C2F [beam=1] |" in text  # same run: told apart by the settings
    again = _result("C2F", "test", r1=36.0, created="2026-02-01T00:00:00")  # an identical evaluation, newer
    kept, superseded = select_results([*records, again])
    assert len(kept) == 5 and [r["metrics"]["rouge1"] for r in superseded] == [31.0]


def test_report_command_counts_what_it_shows(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from scg_summarize.evaluation.report import write_result

    for i, record in enumerate([_result("C2F", "test"), _result("C2F", "valid"), _result("HIER", "test")]):
        write_result(record, tmp_path / f"r{i}.json")
    write_result(_result("C2F", "test", created="2026-03-01T00:00:00"), tmp_path / "copy.json")
    assert cli.main(["report", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "report: 3 result(s) from 4 file(s)" in captured.err and "1 older copies" in captured.err
    assert captured.out.count("| C2F |") == 2 and captured.out.count("| HIER |") == 1


# ----------------------------------------------------------------------------- (8) layout
def test_a_corpus_prepared_another_way_is_evaluated_with_a_warning(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other"
    shutil.copytree(toy.data, other)
    meta = json.loads((other / "meta.json").read_text())
    meta["options"]["layout"] = "sentences" if meta["options"]["layout"] != "sentences" else "grid"
    meta["options"]["lowercase"] = not meta["options"]["lowercase"]
    (other / "meta.json").write_text(json.dumps(meta))
    short = ["--limit", "1", "--quiet", "--greedy", "--max-len", "8"]  # the warning, not the search, is tested here
    assert cli.main(["evaluate", "--run", str(toy.run), "--data", str(other), *short]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "layout=" in err and "lowercase=" in err
    (path,) = (toy.run / "eval").glob("other-test.*.json")
    result = json.loads(path.read_text())
    assert any("layout=" in w for w in result["warnings"])
    assert "(!)" in markdown_report([result])
    # the corpus the run was trained on: no warning
    assert cli.main(["evaluate", "--run", str(toy.run), *short]) == 0
    assert "warning" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- (12) words read
def test_fraction_read_per_word_and_over_the_summary() -> None:
    src_mask = torch.zeros(3, 5, dtype=torch.bool)
    src_mask[0, :5] = True  # chunk 0: 5 words
    src_mask[1, :3] = True  # chunk 1: 3 words
    src_mask[2, :2] = True  # chunk 2: 2 words (never read)
    chunk_read = torch.tensor([[True, False, False], [False, True, False], [False, True, False]])  # 2 words + </s>
    assert fraction_read(chunk_read[:2], src_mask) == pytest.approx(0.8)  # union: (5 + 3) / 10
    assert fraction_read_per_step(chunk_read[:2], src_mask).tolist() == pytest.approx([0.5, 0.3])
    metrics = AttentionMetrics()
    metrics.add({"chunk_read": chunk_read}, 2, src_mask)
    metrics.add({}, 4, src_mask)  # soft attention: every word at every step
    result = metrics.result()
    assert result["fraction_read"] == pytest.approx((0.8 + 1.0) / 2)  # per summary
    assert result["fraction_read_step"] == pytest.approx((0.5 + 0.3 + 4 * 1.0) / 6)  # per generated word


def test_the_docs_name_which_words_read_they_report() -> None:
    evaluation = (REPO_ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert "`fraction_read_step`" in evaluation and "`fraction_read`" in evaluation
    results = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    # the measured column is the union over a summary; it must not be described per generated word
    assert not re.search(r"reads \d+-\d+% of the source\s+words per generated word", results)
    assert "over a whole summary" in results
