"""Issue 18, training side: (2) an existing run folder is never silently replaced; (3) a corpus
without a test split is noted before training, not a KeyError after it; (9) ``train --resume``
needs only ``--out``; (10) outside a terminal the progress lines give the total and an ETA."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from scg_summarize.cli import main
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.progress import format_duration, step_progress, total_steps

from ..conftest import ShortRun
from ..robust_support import TINY

FAST = ["train.max_steps_per_epoch=1", "train.epochs=2"]


def _sets(*overrides: str) -> list[str]:
    return [a for kv in overrides for a in ("--set", kv)]


def _train(data: Path, out: Path, *extra: str, config: str = "tiny-STANDARD") -> int:
    return main(
        [
            "train",
            "--config",
            config,
            "--data",
            str(data),
            "--out",
            str(out),
            "--quiet",
            "--no-test",
            *_sets(*FAST),
            *extra,
        ]
    )


def test_a_new_run_never_replaces_an_existing_one(  # type: ignore[no-untyped-def]
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished_short_run.path, out)  # a finished tiny C2F+MULTI2 run
    one_step = _sets("train.max_steps_per_epoch=1", "train.epochs=1")  # a run, however short
    kept = {name: (out / name).read_bytes() for name in ("config.json", "metrics.jsonl", "best.pt")}
    (out / "eval").mkdir()
    (out / "eval" / "old.json").write_text("{}")
    capsys.readouterr()
    assert _train(synthetic_corpus, out, *one_step) == 2  # a tiny-STANDARD run into it: refused, bad input
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert {name: (out / name).read_bytes() for name in kept} == kept  # nothing touched
    assert _train(synthetic_corpus, out, "--overwrite", *one_step) == 0
    assert json.loads((out / "config.json").read_text())["name"] == "tiny-STANDARD"
    assert not (out / "eval").exists()  # the old run's evaluations cannot pass for the new run's
    assert main(["train", "--out", str(out), "--resume", "--overwrite"]) == 2
    assert "give one of them" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert _train(synthetic_corpus, tmp_path / "file") == 2
    assert "an existing file" in capsys.readouterr().err


def test_a_new_run_never_replaces_a_corpus_or_the_user_s_files(  # type: ignore[no-untyped-def]
    synthetic_corpus: Path, tmp_path: Path, capsys
) -> None:
    """A run writes vocab.txt, data.json, training.json and results.json besides its own files: a
    prepared corpus as --out (its vocab.txt) is refused even with --overwrite, a folder holding
    any of those files without it; a corpus whose vocab.txt was replaced is refused when read."""
    corpus = tmp_path / "corpus"
    shutil.copytree(synthetic_corpus, corpus)
    vocab = (corpus / "vocab.txt").read_bytes()
    capsys.readouterr()
    for extra in ((), ("--overwrite",)):
        assert _train(synthetic_corpus, corpus, *extra) == 2
        assert "is a prepared corpus (meta.json)" in capsys.readouterr().err
    assert (corpus / "vocab.txt").read_bytes() == vocab
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vocab.txt").write_text("my notes\n")
    assert _train(synthetic_corpus, mine) == 2
    assert "already holds files a run writes (vocab.txt)" in capsys.readouterr().err
    assert (mine / "vocab.txt").read_text() == "my notes\n"
    with (corpus / "vocab.txt").open("a") as handle:
        handle.write("extraword\t1\n")
    assert _train(corpus, tmp_path / "run") == 2
    assert re.search(r"vocab.txt: \d+ words, but .*meta.json records vocab_size \d+", capsys.readouterr().err)
    assert _train(tmp_path / "nope", tmp_path / "run2") == 2
    assert "--data " + str(tmp_path / "nope") + ": no such directory" in capsys.readouterr().err
    for bad, message in (
        ("train.epochs=0", "train.epochs must be at least 1, got 0"),
        ("model.test_k=99", "model.test_k = 99, but the documents have"),
    ):
        assert _train(synthetic_corpus, tmp_path / "run3", "--set", bad, config="tiny-C2F") == 2
        assert message in capsys.readouterr().err


def test_rouge_with_no_test_is_refused_before_training(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # (--rouge decodes the test split, which --no-test skips: the run trained and --rouge was dropped unsaid)
    out = tmp_path / "run"
    assert _train(synthetic_corpus, out, "--rouge") == 2  # (_train passes --no-test)
    err = capsys.readouterr().err
    assert "train: error: --rouge decodes the test split after training, which --no-test skips" in err
    assert not out.exists()


def test_resume_takes_config_and_data_from_the_run(  # type: ignore[no-untyped-def]
    finished_short_run: ShortRun, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished_short_run.path, out)  # 2 epochs of 2 steps, trained with --set overrides
    capsys.readouterr()
    # only --out: the configuration (with its overrides) and the corpus come from the run; --set adds epochs
    assert main(["train", "--out", str(out), "--resume", "--quiet", "--no-test", "--set", "train.epochs=3"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["name"] == TINY and config["train"]["epochs"] == 3
    assert (config["train"]["max_steps_per_epoch"], config["train"]["alternate"]) == (2, 0.5)  # the run's --set
    valid = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in valid if x["event"] == "valid"] == [2, 4, 6]  # continued, not restarted
    assert main(["train", "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_corpus_without_test_split_is_noted_before_training(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "no-test"
    shutil.copytree(synthetic_corpus, data)
    meta = json.loads((data / "meta.json").read_text())
    del meta["splits"]["test"]
    (data / "meta.json").write_text(json.dumps(meta))
    shutil.rmtree(data / "test")
    out = tmp_path / "run"
    status = main(
        [
            "train",
            "--config",
            "tiny-STANDARD",
            "--data",
            str(data),
            "--out",
            str(out),
            "--quiet",
            "--rouge",
            *_sets(*FAST),
        ]
    )
    err = capsys.readouterr().err
    assert status == 0, err
    assert "has no split 'test' (available: train, valid)" in err and "Traceback" not in err
    assert err.index("has no split") < err.index("done:")  # said before training, not after
    assert (out / "best.pt").is_file() and not (out / "results.json").exists()


def test_progress_lines_outside_a_terminal_have_total_and_eta(synthetic_corpus: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    config = load_config("tiny-STANDARD", [*FAST, "train.max_steps_per_epoch=2", "train.log_every=2"])
    Trainer(config, synthetic_corpus, tmp_path / "run", quiet=False, log=lines.append).fit()  # pytest: no TTY
    steps = [line for line in lines if line.startswith("step ")]
    assert steps, lines
    pattern = r"step (\d+)/4 \(\d+%\), epoch [12]/2, \d+s, ETA \d+s: loss"
    assert all(re.match(pattern, line) for line in steps), steps
    assert [int(re.match(pattern, line).group(1)) for line in steps] == [2, 4]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("step", "total", "elapsed", "budget", "expected"),
    [
        (0, 100, 0.0, 0.0, "step 0/100 (0%), epoch 1/2, 0s"),
        (25, 100, 30.0, 0.0, "step 25/100 (25%), epoch 1/2, 30s, ETA 1m30s"),
        (25, 100, 30.0, 60.0, "step 25/100 (25%), epoch 1/2, 30s, ETA 30s"),  # the time budget ends it first
        (50, 0, 30.0, 0.0, "step 50, epoch 1/2, 30s"),
    ],
)
def test_step_progress_text(step: int, total: int, elapsed: float, budget: float, expected: str) -> None:
    assert step_progress(step, total, elapsed, epoch=1, epochs=2, budget_s=budget) == expected


def test_durations_and_totals() -> None:
    assert [format_duration(s) for s in (5, 65, 3600 * 2 + 7 * 60)] == ["5s", "1m05s", "2h07m"]
    assert total_steps(3, 625) == 1875 and total_steps(3, 625, max_steps_per_epoch=10) == 30


def test_the_demo_s_bad_arguments_are_usage_errors(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An --out that is a file, and a count below one: status 2 and one line naming the argument
    (they were '[Errno 17] File exists' and 'steps must be positive' with status 1)."""
    (tmp_path / "afile").write_text("")
    assert main(["demo", "--out", str(tmp_path / "afile")]) == 2
    assert f"--out {tmp_path / 'afile'}: an existing file; expected a directory" in capsys.readouterr().err
    for flag in ("--steps", "--n-train", "--n-eval"):
        assert main(["demo", "--out", str(tmp_path / "d"), flag, "0"]) == 2
        assert f"argument {flag}: expected a positive integer, got 0" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_the_demo_does_not_train_over_its_earlier_results(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "demo"
    out.mkdir()
    (out / "results.json").write_text("[]")
    assert main(["demo", "--out", str(out)]) == 2
    assert "already holds the results of a demo" in capsys.readouterr().err
    assert (out / "results.json").read_text() == "[]"
