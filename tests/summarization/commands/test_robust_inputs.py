"""Bad input (issue 13): every case ends in one line per problem naming the file, line, key or
argument and the expected form (exit status 2 for train, prepare and compare; 1 for summarize
and evaluate, whose convention is unchanged), never a traceback, never exit 0 with a wrong
result."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from scg_summarize.cli import main
from scg_summarize.data.storage import SplitWriter, read_meta, write_meta
from scg_summarize.data.vocab import Vocab
from scg_summarize.models.loading import read_checkpoint

from ..conftest import ShortRun
from ..eval_support import ToySetup, make_toy_setup, write_run
from ..robust_support import fork_cli, train_args, wait_child

pytestmark = pytest.mark.usefixtures("single_thread")

#: the runs these tests make: one epoch of 2 steps (what is checked is the refusal, not the training)
ONE_EPOCH = ["--set", "train.epochs=1", "--set", "train.max_steps_per_epoch=2"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("toy"), n_test=4)


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.strip()]


# ----------------------------------------------------------------------------- configuration
def test_every_bad_config_value_is_reported_at_once(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    bad = [
        'train.lr="fast"',
        "train.batch_size=2.5",
        "train.epochs=1.5",
        "train.max_grad_norm=nan",
        "train.checkpoint_every=-1",
        "data.max_target_len=-1",
        "model.hidden=0",
        "train.colour=1",
    ]
    args = ["train", "--config", "tiny-C2F", "--data", str(synthetic_corpus), "--out", str(tmp_path / "run")]
    assert main([*args, *(x for b in bad for x in ("--set", b))]) == 2
    lines = _err_lines(capsys)
    keys = [
        "train.lr",
        "train.batch_size",
        "train.epochs",
        "train.max_grad_norm",
        "train.checkpoint_every",
        "data.max_target_len",
        "model.hidden",
        "train.colour",
    ]
    assert len(lines) == len(keys)
    for key in keys:
        line = next(line for line in lines if f"error: {key}: " in line)
        assert "expected" in line or "unknown option" in line, line
    assert "expected a finite number > 0, got 'fast'" in "\n".join(lines)
    assert "expected an integer >= 1, got 2.5" in "\n".join(lines)
    assert not (tmp_path / "run").exists()  # nothing started


def test_lr_inf_and_a_table_given_as_a_scalar_in_a_toml_file(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('extends = "base"\nmodel = 3\n[train]\nlr = inf\nbatch_size = "16"\n')
    assert main(["train", "--config", str(path), "--data", str(synthetic_corpus), "--out", str(tmp_path / "r")]) == 2
    text = "\n".join(_err_lines(capsys))
    assert "model: expected a table of options ([model] in TOML), got 3" in text
    assert "train.lr: expected a finite number > 0, got inf" in text
    assert "train.batch_size: expected an integer >= 1, got '16'" in text


def test_set_with_a_word_for_a_number_and_an_out_that_is_a_file(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "a-file"
    out.write_text("not a folder")
    assert (
        main(
            [
                "train",
                "--config",
                "tiny-C2F",
                "--data",
                str(synthetic_corpus),
                "--out",
                str(out),
                "--set",
                "train.lr=abc",
            ]
        )
        == 2
    )
    text = "\n".join(_err_lines(capsys))
    assert "train.lr: expected a finite number > 0, got 'abc'" in text
    assert f"--out {out}: an existing file" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_device_cuda_without_a_gpu(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    assert main(train_args(synthetic_corpus, tmp_path / "r", "--set", "train.device='cuda'")) == 2
    assert "train.device: 'cuda', but no CUDA GPU is available here" in "\n".join(_err_lines(capsys))


# ----------------------------------------------------------------------------- prepare
def test_prepare_refuses_zero_chunks_a_negative_limit_and_a_bad_split_name(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "source": "One two.", "target": "One."}) + "\n")
    assert (
        main(
            [
                "prepare",
                "--format",
                "jsonl",
                "--input",
                str(src),
                "--output",
                str(tmp_path / "o"),
                "--chunks",
                "0",
                "--limit",
                "-1",
            ]
        )
        == 2
    )
    lines = _err_lines(capsys)
    assert lines == [
        "prepare: error: --chunks: expected an integer >= 1, got 0",
        "prepare: error: --limit: expected an integer >= 1, got -1",
    ]
    assert not (tmp_path / "o").exists()  # refused before anything is created
    assert main(["prepare", "--format", "jsonl", "--input", f"dev.set={src}", "--output", str(tmp_path / "o")]) == 2
    assert "invalid split name 'dev.set'" in "\n".join(_err_lines(capsys))


@pytest.mark.parametrize(
    ("ids", "line", "words"),
    [
        (["a", "b", "a"], 3, "duplicate example id 'a'"),
        (["a", 1.5], 2, "must be a string or an integer, got float"),
        (["a", None], 2, "got null"),
        (["a", {"x": 1}], 2, "got dict"),
    ],
)
def test_prepare_refuses_duplicate_and_odd_ids(
    tmp_path: Path, capsys, ids: list[object], line: int, words: str
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": i, "source": f"Doc {n} is here.", "target": "A doc."}) + "\n" for n, i in enumerate(ids)
        )
    )
    assert main(["prepare", "--format", "jsonl", "--input", str(src), "--output", str(tmp_path / "o"), "--quiet"]) == 2
    text = "\n".join(_err_lines(capsys))
    assert f"{src}:{line}" in text and words in text
    assert (
        main(
            [
                "prepare",
                "--format",
                "jsonl",
                "--input",
                str(src),
                "--output",
                str(tmp_path / "o"),
                "--quiet",
                "--skip-bad",
            ]
        )
        == 0
    )
    assert read_meta(tmp_path / "o")["splits"]["train"]["examples"] == len(ids) - 1


# ----------------------------------------------------------------------------- corpora
def _copy(corpus: Path, tmp_path: Path) -> Path:
    out = tmp_path / "corpus"
    shutil.copytree(corpus, out, ignore=shutil.ignore_patterns(".lock"))
    return out


@pytest.mark.parametrize("name", ["meta.json", "train/src.npy", "valid/tgt_offsets.npy"])
def test_a_truncated_corpus_file_is_named(synthetic_corpus: Path, tmp_path: Path, capsys, name: str) -> None:
    data = _copy(synthetic_corpus, tmp_path)
    path = data / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert main(train_args(data, tmp_path / "run")) == 2
    text = "\n".join(_err_lines(capsys))
    assert str(path) in text and "prepare" in text


@pytest.mark.parametrize("split", ["valid", "train"])
def test_an_empty_split_is_refused(synthetic_corpus: Path, tmp_path: Path, capsys, split: str) -> None:
    data = _copy(synthetic_corpus, tmp_path)
    shutil.rmtree(data / split)
    meta = read_meta(data)
    meta["splits"][split] = SplitWriter(data / split, 8, 16).finish(Vocab.load(data / "vocab.txt"))
    write_meta(data, meta)
    assert main(train_args(data, tmp_path / "run")) == 2
    role = {"valid": "validation", "train": "training"}[split]
    assert f"the {role} split '{split}' has no examples" in "\n".join(_err_lines(capsys))
    assert not (tmp_path / "run" / "best.pt").exists()


def test_an_unknown_split_name_is_reported_as_such(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    assert main(train_args(synthetic_corpus, tmp_path / "run", "--set", "data.valid_split='dev'")) == 2
    assert "no split 'dev' (available: test, train, valid)" in "\n".join(_err_lines(capsys))


# ----------------------------------------------------------------------------- divergence
@pytest.mark.parametrize(
    ("lr", "steps", "words"),
    [
        ("1e30", 8, "became non-finite "),  # a training loss, within the first epoch
        ("1e8", 2, "the validation loss after step 2"),  # epochs of 2 steps: the first validation has diverged
    ],
)
def test_divergence_stops_naming_the_step_and_the_last_finite_loss(
    synthetic_corpus: Path, tmp_path: Path, capsys, lr: str, steps: int, words: str
) -> None:
    status = main(
        train_args(
            synthetic_corpus,
            tmp_path / "run",
            "--set",
            "train.optimizer='sgd'",
            "--set",
            "train.max_grad_norm=0.0",
            "--set",
            f"train.lr={lr}",
            "--set",
            f"train.max_steps_per_epoch={steps}",
            config="tiny-C2F",
        )
    )
    assert status == 1
    text = "\n".join(_err_lines(capsys))
    assert "training diverged: " in text and words in text and "the last finite training loss was" in text
    assert re.search(r"(at|before|after) step \d+", text)


# ----------------------------------------------------------------------------- checkpoints
def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "random":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    else:  # a valid torch file that is not a checkpoint
        torch.save({"weights": torch.zeros(2)}, path)


@pytest.mark.parametrize("how", ["empty", "truncated", "random", "foreign"])
def test_a_bad_checkpoint_is_named_by_summarize_evaluate_and_resume(
    finished_short_run: ShortRun, synthetic_corpus: Path, tmp_path: Path, capsys, how: str
) -> None:
    run = tmp_path / "run"  # a copy of the session's finished run (tiny C2F+MULTI2, 2 epochs of 2 steps)
    shutil.copytree(finished_short_run.path, run, ignore=shutil.ignore_patterns(".lock"))
    _corrupt(run / "best.pt", how)
    assert main(["summarize", "--run", str(run), "--data", str(synthetic_corpus), "--limit", "2", "--greedy"]) == 2
    assert f"{run / 'best.pt'}:" in "\n".join(_err_lines(capsys))
    assert main(["evaluate", "--run", str(run), "--limit", "2", "--greedy", "--quiet"]) == 2
    assert f"{run / 'best.pt'}:" in "\n".join(_err_lines(capsys))
    _corrupt(run / "checkpoint.pt", how)
    assert main(train_args(synthetic_corpus, run, *finished_short_run.options, "--resume")) == 2
    text = "\n".join(_err_lines(capsys))
    assert f"{run / 'checkpoint.pt'}:" in text and "checkpoint" in text


def test_resume_refuses_changed_options_by_name_and_applies_harmless_ones(
    finished_short_run: ShortRun, synthetic_corpus: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"  # a copy of the session's finished run (2 epochs)
    shutil.copytree(finished_short_run.path, run, ignore=shutil.ignore_patterns(".lock"))
    resume = train_args(synthetic_corpus, run, *finished_short_run.options, "--resume")
    assert main([*resume, "--set", "train.lr=0.1"]) == 2
    assert "train.lr: saved 0.01, given 0.1" in "\n".join(_err_lines(capsys))
    assert main([*resume, "--set", "model.hidden=32"]) == 2  # a checkpoint of another model size
    assert "model.hidden: saved 16, given 32" in "\n".join(_err_lines(capsys))
    assert read_checkpoint(run / "checkpoint.pt")["config"]["train"]["lr"] == 0.01
    assert main([*resume, "--set", "train.epochs=3"]) == 0
    assert "resume: applying train.epochs = 3 (saved 2)" in "\n".join(_err_lines(capsys))
    assert read_checkpoint(run / "checkpoint.pt")["config"]["train"]["epochs"] == 3


def test_a_hier_checkpoint_is_not_resumed_as_c2f(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    hier, c2f = tmp_path / "hier", tmp_path / "c2f"
    assert main(train_args(synthetic_corpus, hier, *ONE_EPOCH, "--set", "train.alternate=0.0", config="tiny-HIER")) == 0
    assert main(train_args(synthetic_corpus, hier, "--resume", config="tiny-C2F")) == 2
    assert "holds a run of 'tiny-HIER', not 'tiny-C2F'" in "\n".join(_err_lines(capsys))
    shutil.copytree(hier, c2f, ignore=shutil.ignore_patterns(".lock", "config.json"))  # no name to compare
    assert main(train_args(synthetic_corpus, c2f, "--resume", "--set", "train.alternate=0.0", config="tiny-C2F")) == 2
    assert "model.attention: saved 'hier', given 'c2f'" in "\n".join(_err_lines(capsys))


# ----------------------------------------------------------------------------- summarize, evaluate
def test_summarize_refuses_a_corpus_of_another_vocabulary(toy: ToySetup, synthetic_corpus: Path, capsys) -> None:
    other = synthetic_corpus  # another seed and size: another vocabulary
    assert Vocab.load(other / "vocab.txt") != Vocab.load(toy.data / "vocab.txt")
    assert main(["summarize", "--run", str(toy.run), "--data", str(other), "--greedy"]) == 2
    assert "its vocabulary" in "\n".join(_err_lines(capsys))
    assert main(["summarize", "--run", str(toy.run), "--data", str(toy.data), "--greedy", "--limit", "1"]) == 0


def test_a_run_whose_eval_table_is_bad_is_refused_at_load_naming_the_config(
    toy: ToySetup, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    shutil.copytree(toy.run, run, ignore=shutil.ignore_patterns(".lock"))
    config = json.loads((run / "config.json").read_text())
    config["eval"] = {**config.get("eval", {}), "beam": 5}  # the key of an old run: now beam_size
    (run / "config.json").write_text(json.dumps(config))
    assert main(["summarize", "--run", str(run), "--data", str(toy.data), "--greedy", "--limit", "1"]) == 2
    assert f"{run / 'config.json'}: eval.beam: unknown option" in "\n".join(_err_lines(capsys))


def test_binary_standard_input_is_refused_like_a_binary_file(
    toy: ToySetup, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbage = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00\x10\n"
    (tmp_path / "g.bin").write_bytes(garbage)
    assert main(["summarize", "--run", str(toy.run), "--input", str(tmp_path / "g.bin"), "--greedy"]) == 2
    from_file = _err_lines(capsys)[-1]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(garbage)))
    assert main(["summarize", "--run", str(toy.run), "--input", "-", "--greedy"]) == 2
    from_stdin = _err_lines(capsys)[-1]
    assert "invalid UTF-8" in from_file and from_stdin == from_file.replace(str(tmp_path / "g.bin"), "<stdin>")
    assert capsys.readouterr().out == ""


def test_blank_and_wordless_lines_keep_the_output_aligned(toy: ToySetup, tmp_path: Path, capsys) -> None:
    from scg_summarize.data import SummarizationDataset

    dataset = SummarizationDataset(toy.data, "test")
    docs = [" \\n ".join(dataset.text(i).src_sentences) for i in range(2)]
    source = tmp_path / "docs.txt"
    source.write_text(f"\n{docs[0]}\n\n \\n \\n \n{docs[1]}\n\n")  # line 4: two empty paragraphs
    assert main(["summarize", "--run", str(toy.run), "--input", str(source), "--greedy", "--max-len", "4"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.split("\n")[:-1]
    assert [bool(line) for line in lines] == [False, True, False, False, True, False]  # line i answers line i
    assert captured.err.count("empty document, writing an empty summary") == 4
    assert main(["summarize", "--run", str(toy.run), "--input", str(source), "--greedy", "--jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r.get("empty", False) for r in records] == [True, False, True, True, False, True]
    assert records[0]["id"].endswith(":1") and records[3]["id"].endswith(":4")


def test_summarize_into_a_closed_pipe_ends_quietly(toy: ToySetup, tmp_path: Path) -> None:
    from scg_summarize.data import SummarizationDataset

    dataset = SummarizationDataset(toy.data, "test")
    doc = " \\n ".join(dataset.text(0).src_sentences)
    (tmp_path / "many.txt").write_text((doc + "\n") * 300)
    # a STANDARD run: the pipe is what is tested, and a process that runs C2F's hard attention
    # (its custom operators) costs twice the CPU
    run = write_run(tmp_path / "run", toy.data, "tiny-STANDARD", ["model.hidden=8", "model.emb_dim=8"], seed=1)
    # a real process whose stdout is a pipe that its reader closes (`| head -1`), forked from this
    # one so that it does not import torch again (robust_support.fork_cli)
    read, write = os.pipe()
    with tempfile.TemporaryFile() as err:
        args = ("summarize", "--run", run, "--input", tmp_path / "many.txt", "--greedy", "--batch-size", "1")
        pid = fork_cli(*args, stdout=write, stderr=err.fileno())
        os.close(write)
        with os.fdopen(read, "rb") as reader:
            assert reader.readline()
        code = wait_child(pid, timeout=120)
        err.seek(0)
        message = err.read().decode()
    assert code == 128 + signal.SIGPIPE, message
    assert "Traceback" not in message and "BrokenPipe" not in message and "Exception ignored" not in message, message


def test_evaluate_on_a_split_without_references_names_the_line(toy: ToySetup, tmp_path: Path, capsys) -> None:
    data = _copy(toy.data, tmp_path)
    text = data / "test" / "text.jsonl"
    records = [json.loads(line) for line in text.read_text().splitlines()]
    lines = [json.dumps({k: v for k, v in r.items() if k != "refs"}) + "\n" for r in records]
    text.write_text("".join(lines))
    np.save(data / "test" / "text_offsets.npy", np.cumsum([0] + [len(x.encode()) for x in lines]).astype(np.int64))
    assert main(["evaluate", "--run", str(toy.run), "--data", str(data), "--greedy", "--quiet"]) == 2
    message = "\n".join(_err_lines(capsys))
    assert f"{text}:1: expected an object with 'id', 'refs'" in message


# ----------------------------------------------------------------------------- compare
@pytest.mark.parametrize(
    ("score", "words"),
    [
        ("NaN", "got nan"),
        ("1.5", "got 1.5"),
        ("-0.1", "got -0.1"),
        ("null", "got null"),
        ("[0.1]", "got list"),
        ('"0.3"', "got str"),
        ("true", "got bool"),
    ],
)
def test_compare_refuses_scores_that_are_not_fractions(tmp_path: Path, capsys, score: str, words: str) -> None:
    good = "".join(json.dumps({"id": f"d{i}", "rouge": {"rouge1": 0.3}}) + "\n" for i in range(5))
    (tmp_path / "a.jsonl").write_text(good)
    (tmp_path / "b.jsonl").write_text(
        good.replace('"d2", "rouge": {"rouge1": 0.3}', f'"d2", "rouge": {{"rouge1": {score}}}')
    )
    assert (
        main(
            ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--metrics", "rouge1", "--samples", "100"]
        )
        == 2
    )
    text = "\n".join(_err_lines(capsys))
    assert f"{tmp_path / 'b.jsonl'}:3: 'rouge'.rouge1 must be a number in [0, 1], {words}" in text
    assert capsys.readouterr().out == ""


def test_compare_json_never_writes_over_an_input_a_folder_or_a_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--json`` replaced its own input A without asking, and a folder or a path under a file
    ended in a traceback."""
    lines = "".join(json.dumps({"id": f"x{i}", "rouge": {"rouge1": 0.1 * i}}) + "\n" for i in range(5))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(lines)
    b.write_text(lines)
    base = ["compare", str(a), str(b), "--metrics", "rouge1", "--samples", "100"]
    for extra in ((), ("--overwrite",)):
        assert main([*base, "--json", str(a), *extra]) == 2
        assert f"--json {a}: it is the A file, which writing would erase" in "\n".join(_err_lines(capsys))
    assert a.read_text() == lines
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    assert main([*base, "--json", str(tmp_path / "d")]) == 2
    assert "a directory; expected the path of a file to write" in "\n".join(_err_lines(capsys))
    assert main([*base, "--json", str(tmp_path / "f" / "x.json")]) == 2
    assert f"{tmp_path / 'f'} is a file, not a folder" in "\n".join(_err_lines(capsys))
    out = tmp_path / "c.json"
    assert main([*base, "--json", str(out)]) == 0
    assert main([*base, "--json", str(out)]) == 2
    assert "it exists; pass --overwrite" in "\n".join(_err_lines(capsys))
    assert main([*base, "--json", str(out), "--overwrite", "--level", "0.9"]) == 0
    assert main([*base, "--level", "1.5"]) == 2
    assert "argument --level: expected a number between 0 and 1" in "\n".join(_err_lines(capsys))


def test_compare_refuses_a_binary_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "x", "rouge": {"rouge1": 0.3}}) + "\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\xff\xfe\x89binary\n")
    assert main(["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.bin"), "--metrics", "rouge1"]) == 2
    assert f"{tmp_path / 'b.bin'}:1: not UTF-8 text" in "\n".join(_err_lines(capsys))


# ----------------------------------------------------------------------------- the table commands
def test_abs_variants_refuses_another_family_s_run_and_a_fraction_outside_0_1(
    finished_short_run: ShortRun, synthetic_corpus: Path, tmp_path: Path, capsys
) -> None:
    """(A C2F run was a TypeError from deep in beam search; --tune-fraction 2 an IndexError.)"""
    base = ["abs-variants", "--run", str(finished_short_run.path), "--data", str(synthetic_corpus)]
    assert main([*base, "--out", str(tmp_path / "a.json")]) == 2
    assert "abs-variants needs an ABS run (model.family = 'abs'), got 'c2f'" in capsys.readouterr().err
    assert main([*base, "--tune-fraction", "2", "--out", str(tmp_path / "b.json")]) == 2
    assert "--tune-fraction: expected a number between 0 and 1 (exclusive), got 2.0" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["abs-baselines"], ["abs-variants", "--run", "RUN"], ["mal-conditioning"]])
def test_table_commands_name_a_missing_corpus_in_one_line(argv: list[str], tmp_path: Path, capsys) -> None:
    assert main([*argv, "--data", str(tmp_path / "none"), "--out", str(tmp_path / "out.json")]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    assert captured.err.strip() == (
        f"scg-summarize {argv[0]}: error: {tmp_path / 'none'}: no meta.json; not a prepared corpus (run prepare)"
    )
