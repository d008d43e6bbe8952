"""Issue 28, items 11-12: damaged files, a full disk and a diverging model end in one line that
names the file (and says what is kept), never in a traceback from deep inside numpy or torch."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from scg_summarize.cli import main
from scg_summarize.data.dataset import SummarizationDataset
from scg_summarize.models.mal.pagerank import PageRankError, closed_form_pagerank

from ..conftest import ShortRun

TINY = ["--quiet", "--set", "train.epochs=1", "--set", "train.max_steps_per_epoch=1"]


def _copy(corpus: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(corpus, tmp_path / "corpus"))


def test_a_corrupt_config_json_is_named(
    finished_short_run: ShortRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(finished_short_run.path, tmp_path / "run"))
    (run / "config.json").write_text('{"name": "tiny-STANDARD", ')
    assert main(["evaluate", "--run", str(run), "--quiet", "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'config.json'}: not valid JSON" in err and "Traceback" not in err


def test_a_src_array_of_the_wrong_shape_is_named(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _copy(synthetic_corpus, tmp_path)
    src = np.load(corpus / "test" / "src.npy")
    np.save(corpus / "test" / "src.npy", src.reshape(len(src), -1))  # (examples, M * N): one axis lost
    assert main(["baseline", "--method", "first", "--data", str(corpus), "--split", "test", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{corpus / 'test' / 'src.npy'}: an array of shape {(len(src), src.shape[1] * src.shape[2])}" in err


def test_a_text_file_cut_mid_line_is_named_with_the_line(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _copy(synthetic_corpus, tmp_path)
    text = corpus / "test" / "text.jsonl"
    lines = text.read_bytes().splitlines(keepends=True)
    text.write_bytes(b"".join(lines)[:-30])  # the last line loses its end
    assert main(["baseline", "--method", "first", "--data", str(corpus), "--split", "test", "--quiet"]) == 2
    assert f"{text}:{len(lines)}: not a complete JSON line" in capsys.readouterr().err


def test_token_ids_outside_the_vocabulary_are_refused_before_training(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _copy(synthetic_corpus, tmp_path)
    src = np.load(corpus / "train" / "src.npy")
    src[-1, 0, 0] = 10**6
    np.save(corpus / "train" / "src.npy", src)
    with pytest.raises(ValueError, match=r"train/src\.npy: token ids from 0 to 1000000, but the vocabulary has"):
        SummarizationDataset(corpus, "train")
    run = tmp_path / "run"
    assert main(["train", "--config", "tiny-STANDARD", "--data", str(corpus), "--out", str(run), *TINY]) == 2
    assert "src.npy: token ids from 0 to 1000000" in capsys.readouterr().err
    assert not (run / "checkpoint.pt").exists()


def _full_disk(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", "somewhere/file")


def test_a_full_disk_during_prepare_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scg_summarize.data.prepare.Vocab.save", _full_disk)
    out = tmp_path / "corpus"
    args = ["prepare", "--format", "synthetic", "--n-train", "20", "--n-valid", "4", "--n-test", "4", "--quiet"]
    assert main([*args, "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "No space left on device while writing somewhere/file" in err
    assert "incomplete corpus (no meta.json" in err and "--overwrite" in err and not (out / "meta.json").exists()


def test_a_full_disk_while_logging_metrics_is_one_line(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("scg_summarize.train.loop.append_record", _full_disk)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--config",
                "tiny-STANDARD",
                "--data",
                str(synthetic_corpus),
                "--out",
                str(run),
                "--no-test",
                *TINY,
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "train: error: No space left on device while writing somewhere/file" in err and "--resume" in err
    assert "Traceback" not in err


def test_pagerank_error_names_the_guard_in_use() -> None:
    nodes = torch.ones(2, 3, dtype=torch.bool)
    broken = torch.full((2, 3, 3), float("nan"))
    with pytest.raises(PageRankError, match="guard 'softplus' keeps the edge weights positive.*diverged"):
        closed_form_pagerank(broken, nodes, guard="softplus")
    with pytest.raises(PageRankError, match=r"guard 'none'\); use model.pagerank_guard"):
        closed_form_pagerank(broken, nodes, guard="none")


def test_a_diverging_model_ends_training_in_one_line(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def diverge(self: object) -> None:
        raise PageRankError("closed-form PageRank (eq. 11): ... the model has diverged")

    monkeypatch.setattr("scg_summarize.train.loop.Trainer.fit", diverge)
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--config",
                "tiny-STANDARD",
                "--data",
                str(synthetic_corpus),
                "--out",
                str(run),
                "--no-test",
                *TINY,
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "train: error: closed-form PageRank" in err and "checkpoint.pt holds the last checkpoint" in err


def test_baseline_refusal_names_its_own_option(
    synthetic_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "baseline",
        "--method",
        "first",
        "--data",
        str(synthetic_corpus),
        "--split",
        "test",
        "--quiet",
        "--output-dir",
        str(tmp_path / "b"),
    ]
    assert main(args) == 0
    (written,) = (tmp_path / "b").glob("*.json")
    written.write_text(json.dumps({"not": "a result"}))
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "choose another --output-dir" in err and "--output " not in err.replace("--output-dir", "")
