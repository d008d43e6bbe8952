"""Figures: coarse and word attention heatmaps, training curves (PNG and SVG, non-empty)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize import cli
from scg_summarize.viz import (
    attention_from_record,
    coarse_heatmap,
    load_curves,
    plot_curves,
    word_heatmap,
)

from ..eval_support import ToySetup, make_toy_setup

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def attention_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``summarize --attention`` output of the toy run on two synthetic documents."""
    root = tmp_path_factory.mktemp("viz")
    toy: ToySetup = make_toy_setup(root, n_test=2)
    out = root / "att.jsonl"
    args = ["summarize", "--run", str(toy.run), "--data", str(toy.data), "--max-len", "6", "--beam", "2"]
    assert cli.main([*args, "--attention", "--output", str(out)]) == 0
    return out


def _record(path: Path, index: int = 0) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[index])  # type: ignore[no-any-return]


def _assert_figure_files(paths: list[Path]) -> None:
    for path in paths:
        assert path.is_file() and path.stat().st_size > 5_000, path
        head = path.read_bytes()[:200]
        assert head.startswith(PNG_MAGIC) if path.suffix == ".png" else b"<svg" in head or b"<?xml" in head


def test_coarse_heatmap_rows_are_chunks_and_columns_words(attention_file: Path) -> None:
    att = attention_from_record(_record(attention_file), "att.jsonl:1")
    fig = coarse_heatmap(att)
    ax = fig.axes[0]
    words = [t.get_text() for t in ax.get_xticklabels()]
    chunks = [t.get_text() for t in ax.get_yticklabels()]
    assert words == att.steps[:-1]  # generated words, </s> left out
    assert len(chunks) == sum(1 for c in att.source if c)
    assert chunks[0].startswith(" ".join(att.source[0][:2]))
    assert len(ax.patches) == len(words)  # one outlined (read) chunk per word: argmax
    # the figures' files (each drawn by save_figure, which does not depend on the figure, ~0.1-0.3 s of
    # CPU per file): test_visualize_command writes this one as PNG, the word heatmap as SVG (each format
    # read from the suffix) and the curves as PNG and SVG (--format, a list of formats)


def test_word_heatmap_shows_the_words_of_the_chunk_read(attention_file: Path) -> None:
    att = attention_from_record(_record(attention_file, 1))
    fig = word_heatmap(att, step=1)
    texts = [t.get_text() for t in fig.axes[0].texts]
    (chunk,) = [m for m in range(len(att.source)) if att.chunk_read is not None and att.chunk_read[1, m] > 0.5]
    assert texts == att.source[chunk]  # its file: test_visualize_command
    with pytest.raises(ValueError, match="out of range"):
        word_heatmap(att, step=99)


def test_training_curves_from_the_trainers_log(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    lines = [
        {"event": "train", "step": 5, "epoch": 0.5, "loss": 2.3, "ppl": 10.0},
        {"event": "train", "step": 10, "epoch": 1.0, "loss": 2.0, "ppl": 7.4},
        {"event": "valid", "step": 10, "epoch": 1.0, "nll": 2.1, "ppl": 8.2, "read_frac": 0.2},
        {"event": "train", "step": 20, "epoch": 2.0, "loss": 1.8, "ppl": 6.0},
        {"event": "valid", "step": 20, "epoch": 2.0, "nll": 2.0, "ppl": 7.4},
        {"event": "end", "step": 20, "epoch": 2.0, "best_ppl": 7.4},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    series = load_curves(log)
    assert series == {"train": [(0.5, 10.0), (1.0, 7.4), (2.0, 6.0)], "valid": [(1.0, 8.2), (2.0, 7.4)]}
    fig = plot_curves(series)
    assert [line.get_label() for line in fig.axes[0].lines] == ["train", "valid"]  # its file: test_visualize_command
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps({"epoch": 1, "train_ppl": 9.0, "valid_ppl": 9.5}) + "\n")
    assert load_curves(flat) == {"train_ppl": [(1.0, 9.0)], "valid_ppl": [(1.0, 9.5)]}


def test_visualize_command(attention_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # each figure once, in PNG or SVG by its suffix; the list of formats (--format) on the curves, the cheapest to draw
    out = tmp_path / "figs" / "c.png"
    assert cli.main(["visualize", "coarse", "--input", str(attention_file), "--output", str(out)]) == 0
    _assert_figure_files([out])
    assert (
        cli.main(
            [
                "visualize",
                "words",
                "--input",
                str(attention_file),
                "--example",
                "1",
                "--step",
                "0",
                "--output",
                str(tmp_path / "w.svg"),
            ]
        )
        == 0
    )
    _assert_figure_files([tmp_path / "w.svg"])
    log = tmp_path / "run" / "metrics.jsonl"
    log.parent.mkdir()
    log.write_text(json.dumps({"event": "valid", "epoch": 1, "ppl": 5.0}) + "\n")
    curves = ["visualize", "curves", "--run", str(log.parent), "--output", str(tmp_path / "k"), "--format", "png,svg"]
    assert cli.main(curves) == 0
    _assert_figure_files([tmp_path / "k.png", tmp_path / "k.svg"])


def test_visualize_errors_name_the_problem(attention_file: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "a", "summary": "x"}) + "\n")
    assert cli.main(["visualize", "coarse", "--input", str(plain), "--output", str(tmp_path / "x.png")]) == 2
    assert f"{plain}:1: no 'attention' object" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "visualize",
                "coarse",
                "--input",
                str(attention_file),
                "--example",
                "7",
                "--output",
                str(tmp_path / "x.png"),
            ]
        )
        == 2
    )
    assert "no example 7 (it has 2)" in capsys.readouterr().err
    assert cli.main(["visualize", "coarse", "--input", str(attention_file), "--output", str(tmp_path / "x.gif")]) == 2
    assert "unknown figure format 'gif'" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"epoch": 1, "ppl": 3}\n{oops\n')
    assert cli.main(["visualize", "curves", "--log", str(bad), "--output", str(tmp_path / "x.png")]) == 2
    assert f"{bad}:2: invalid JSON" in capsys.readouterr().err
