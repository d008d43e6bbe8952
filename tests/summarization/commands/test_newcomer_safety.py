"""Issue 28, items 3-8 and 13: nothing a user made is replaced or emptied without being asked, no
special token reaches a summary, bad decoding/model options are refused (help and usage errors
that import neither torch nor matplotlib: test_cli_commands, in the same process as every command's)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
from scg_summarize.cli import main
from scg_summarize.commands._decoding_args import add_decode_arguments, decode_options
from scg_summarize.data.vocab import Vocab
from scg_summarize.decode_options import DecodeOptions, Hypothesis
from scg_summarize.decoding.inputs import SourceDocument
from scg_summarize.decoding.summarizer import Summarizer, replace_unks
from scg_summarize.demo import DEFAULT_CONFIGS
from scg_summarize.train.config_loading import load_config

from ..conftest import ShortRun


def _fake_run(folder: Path) -> dict[str, bytes]:
    """A folder with the files of a training run; returns their contents."""
    folder.mkdir(parents=True)
    files = {"config.json": b'{"name": "x"}\n', "best.pt": b"weights", "vocab.txt": b"<pad>\n<unk>\n<s>\n</s>\nw\n"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return files


def _unchanged(folder: Path, files: dict[str, bytes]) -> bool:
    return all((folder / name).read_bytes() == content for name, content in files.items())


def test_demo_refuses_to_train_over_a_run_or_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    files = _fake_run(out / DEFAULT_CONFIGS[0])
    assert main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and DEFAULT_CONFIGS[0] in err
    assert _unchanged(out / DEFAULT_CONFIGS[0], files) and not (out / "data").exists()  # nothing generated either
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "results.json").write_text("[]\n")
    assert main(["demo", "--out", str(tmp_path / "other")]) == 2
    assert "already holds the results of a demo" in capsys.readouterr().err


def test_demo_checks_every_configuration_and_its_corpus_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt second configuration or --set key was found after the 10000-document corpus was
    generated and the first model trained (with --overwrite, after its earlier run was deleted);
    a --data that is not a corpus after OUT was made and 'training ...' printed."""
    out = tmp_path / "demo"
    files = _fake_run(out / DEFAULT_CONFIGS[0])
    given = ["demo", "--out", str(out), "--overwrite", "--configs", DEFAULT_CONFIGS[0]]
    assert main([*given, "C2F+MULT2"]) == 2
    assert "scg-summarize demo: error: unknown configuration 'C2F+MULT2'; available: " in capsys.readouterr().err
    assert main([*given, "--set", "train.lrr=1"]) == 2
    assert (
        "scg-summarize demo: error: train.lrr: unknown option; did you mean 'lr'? (known: " in capsys.readouterr().err
    )
    assert _unchanged(out / DEFAULT_CONFIGS[0], files) and not (out / "data").exists()  # nothing deleted or made
    other = tmp_path / "other"
    assert main(["demo", "--out", str(other), "--data", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert f"--data {tmp_path / 'nope'}: no such directory; expected a corpus written by scg-summarize prepare" in err
    assert main(["demo", "--out", str(other), "--data", str(out)]) == 2  # a folder, but no corpus
    err = capsys.readouterr().err
    assert f"{out}: not a prepared corpus (no meta.json); expected a corpus" in err and "training" not in err
    assert not other.exists()


def test_summarize_refuses_to_write_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs.txt"
    docs.write_text("a first document .\nanother one .\n")
    before = docs.read_bytes()
    for output in (docs, tmp_path / "." / "docs.txt"):  # the same file, spelled another way
        assert (
            main(["summarize", "--run", str(tmp_path / "no-run"), "--input", str(docs), "--output", str(output)]) == 2
        )
        err = capsys.readouterr().err
        assert "is the --input file" in err and docs.read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["summarize", "--run", "RUN", "--input", "DOCS", "--output", "MINE"], "--output"),
        (["report", "RUN", "--output", "MINE"], "--output"),
        (["report", "RUN", "--json", "MINE"], "--json"),
        (["visualize", "curves", "--run", "RUN", "--output", "MINE"], "--output"),
        (["abs-baselines", "--data", "DATA", "--out", "MINE"], "--out"),
        (["abs-variants", "--run", "RUN", "--data", "DATA", "--out", "MINE"], "--out"),
        (["mal-conditioning", "--data", "DATA", "--out", "MINE"], "--out"),
    ],
)
def test_outputs_a_user_has_are_not_replaced_without_overwrite(
    argv: list[str], option: str, finished_short_run: ShortRun, synthetic_corpus: Path, tmp_path: Path, capsys
) -> None:
    """Every command's output file that exists is refused before any work, unless --overwrite
    (these commands replaced it silently); with --overwrite the command runs (checked for
    summarize, the cheapest)."""
    mine = tmp_path / ("mine.png" if argv[0] == "visualize" else "mine.txt")
    mine.write_text("mine\n")
    docs = tmp_path / "docs.txt"
    docs.write_text("a first document .\n")
    names = {"RUN": str(finished_short_run.path), "DOCS": str(docs), "DATA": str(synthetic_corpus), "MINE": str(mine)}
    args = [names.get(a, a) for a in argv]
    assert main(args) == 2
    assert f"{option} {mine}: it exists; pass --overwrite to replace it" in capsys.readouterr().err
    assert mine.read_text() == "mine\n"
    if argv[0] == "summarize":  # (the cheapest to run through)
        assert main([*args, "--overwrite"]) == 0
        assert mine.read_text() != "mine\n"
    folder = tmp_path / "folder.png"  # a directory: refused, --overwrite or not (it crashed with one)
    folder.mkdir()
    at_folder = [str(folder) if a == str(mine) else a for a in args]
    for extra in ([], ["--overwrite"]):
        assert main([*at_folder, *extra]) == 2
        assert f"{option} {folder}: a directory; expected the path of a file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("device", "said"),
    [("meta", "expected cpu, cuda or cuda:N, got 'meta'"), ("nope", "expected cpu, cuda or cuda:N, got 'nope'")]
    + ([] if torch.cuda.is_available() else [("cuda", "'cuda', but no CUDA GPU is available here")]),
)
def test_a_decoding_device_this_machine_lacks_is_a_usage_error(device: str, said: str, tmp_path: Path, capsys) -> None:
    """(``--device cuda`` without a GPU was reported as an unreadable checkpoint.)"""
    docs = tmp_path / "docs.txt"
    docs.write_text("a document .\n")
    assert main(["summarize", "--run", str(tmp_path / "run"), "--input", str(docs), "--device", device]) == 2
    assert f"argument --device: {said}" in capsys.readouterr().err


def test_prepare_refuses_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    files = _fake_run(run)
    for extra in ([], ["--overwrite"]):  # not even with --overwrite: a run folder is not a corpus
        status = main(
            [
                "prepare",
                "--format",
                "synthetic",
                "--n-train",
                "20",
                "--n-valid",
                "5",
                "--n-test",
                "5",
                "--quiet",
                "--output",
                str(run),
                *extra,
            ]
        )
        assert status == 2
        err = capsys.readouterr().err
        assert "training run's folder" in err and "vocab.txt" in err
        assert _unchanged(run, files) and not (run / "meta.json").exists()


def test_train_refuses_a_run_folder_inside_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text("{}\n")
    for out in (data, data / "run"):
        assert main(["train", "--config", "tiny-STANDARD", "--data", str(data), "--out", str(out)]) == 2
        assert "overlap" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["meta.json"]  # nothing written into the corpus


def test_resume_with_config_takes_the_corpus_from_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(load_config("tiny-STANDARD").to_dict()) + "\n")
    assert main(["train", "--resume", "--config", "tiny-STANDARD", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert "missing --data" in err and "records no corpus (no data.json)" in err
    (run / "data.json").write_text(json.dumps({"data_dir": str(tmp_path / "corpus")}) + "\n")
    assert main(["train", "--resume", "--config", "tiny-STANDARD", "--out", str(run)]) == 2
    err = capsys.readouterr().err  # now the recorded corpus is used (and named: it does not exist)
    assert "missing" not in err and str(tmp_path / "corpus") in err


def _decode_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "x"])
def test_length_penalty_must_be_finite(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("summarize", "evaluate"):  # refused before the run is read, naming the flag
        assert main([command, "--run", "no-such-run", "--length-penalty", value]) == 2
        err = capsys.readouterr().err
        assert f"argument --length-penalty: expected a finite number >= 0, got '{value}'" in err
    assert decode_options(_decode_args("--length-penalty", "0.5")).length_penalty == 0.5


def test_another_family_refuses_the_c2f_options() -> None:
    with pytest.raises(ValueError, match=r"model\.multi, .*: not an option of the 'abs' family"):
        load_config("C2F+MULTI2", ["model.family=abs"])  # (each family has its own options)


def _summarizer(unk: str) -> tuple[Summarizer, Vocab]:
    vocab = Vocab(["alpha", "beta", "gamma"])
    options = DecodeOptions(greedy=True, max_len=8, min_len=0, no_repeat_ngram=0, unk=unk)
    return Summarizer(torch.nn.Identity(), vocab, options), vocab  # type: ignore[arg-type]


def _document() -> SourceDocument:
    words = [["alpha", "</s>"], ["beta", "gamma"]]
    src, src_mask = torch.zeros(2, 2, dtype=torch.long), torch.ones(2, 2, dtype=torch.bool)
    return SourceDocument(id="d", src=src, src_mask=src_mask, words=words)


@pytest.mark.parametrize("unk", ["replace", "forbid", "allow"])
def test_no_special_token_reaches_a_summary(unk: str) -> None:
    summarizer, vocab = _summarizer(unk)
    special = [vocab.pad_id, vocab.bos_id, vocab.eos_id]
    ids = [vocab.token_to_id("alpha"), vocab.unk_id, *special, vocab.unk_id, vocab.token_to_id("beta")]
    attn = torch.zeros(len(ids) + 1, 2, 2)
    attn[1, 0, 1] = 0.9  # the first <unk> looks hardest at the source's </s> marker ...
    attn[1, 1, 0] = 0.1  # ... and next at "beta", which replaces it
    hyp = Hypothesis(ids, log_prob=-1.0, score=-1.0, extras={"word_attn": attn})  # the second <unk>: no attention
    text = summarizer.to_summary(_document(), hyp).text.split()
    assert not {"<pad>", "<s>", "</s>"} & set(text)
    if unk == "replace":
        assert text == ["alpha", "beta", "beta"]  # replaced by a word, never by </s>; the unreplaceable one dropped
    else:
        assert text.count("<unk>") == 2  # asked to keep <unk> (allow), or the model never produces it (forbid)


def test_replace_unks_never_picks_a_marker() -> None:
    attn = torch.zeros(1, 2, 2)
    attn[0, 0, 1] = 1.0  # all attention on </s>: nothing to replace with
    assert replace_unks(["<unk>"], attn, _document().words) == (["<unk>"], 0)


@pytest.mark.parametrize("config", ["ABS", "PAULUS-ML", "MAL", "C2F"])
def test_family_decoding_defaults_replace_unk(config: str) -> None:
    assert load_config(config).eval.decode.unk == "replace"  # documented in the README: no <unk> in a summary


def test_demo_steps_default_is_the_demo_modules() -> None:
    from scg_summarize.commands.demo import add_arguments
    from scg_summarize.demo import DEFAULT_STEPS, schedule

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).steps == DEFAULT_STEPS and schedule(DEFAULT_STEPS) == (DEFAULT_STEPS // 150, 150)
    with pytest.raises(ValueError, match="multiple of 150"):
        schedule(200)


@pytest.mark.parametrize(
    ("config", "named"),
    [("C2F", "the documented defaults"), ("PAULUS-ML", "the run's [eval] table: --beam --max-len;"),
     ("ABS", "the run's [eval] table: --beam --max-len --min-len --length-penalty --no-repeat-ngram;")],
)  # fmt: skip
def test_evaluate_says_which_decoding_settings_a_family_overrides(config: str, named: str) -> None:
    from scg_summarize.commands._decoding_args import describe_sources, given_options

    run = load_config(config).eval.decode
    assert named in describe_sources(decode_options(_decode_args(), run), {}, run)
    args = _decode_args("--beam", "4")
    assert describe_sources(decode_options(args), given_options(args), None).startswith("command line: --beam")


class _UnkEveryOtherStep:
    """A family's decoder whose every second step makes ``<unk>`` the likeliest word."""

    def __init__(self, decoder: object, unk: int) -> None:
        self.decoder, self.unk, self.calls = decoder, unk, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.decoder, name)

    def step(self, state: object, prev: torch.Tensor) -> tuple[torch.Tensor, object, object]:
        log_probs, state, extras = self.decoder.step(state, prev)  # type: ignore[attr-defined]
        self.calls += 1
        if self.calls % 2 == 0:
            log_probs = log_probs.clone()
            log_probs[:, self.unk] = log_probs.max(dim=-1).values + 5.0
        return log_probs, state, extras


@pytest.mark.parametrize("config", ["tiny-STANDARD+COPY", "tiny-PAULUS-ML", "tiny-MAL", "tiny-ABS"])
def test_no_family_puts_a_special_token_in_a_summary(config: str, synthetic_corpus: Path) -> None:
    from scg_summarize.data.dataset import SummarizationDataset
    from scg_summarize.decoding import documents_from_split
    from scg_summarize.decoding.adapters import ModelStepDecoder
    from scg_summarize.train.model_init import build_model

    data = SummarizationDataset(synthetic_corpus, "test")
    torch.manual_seed(0)
    model = build_model(load_config(config), len(data.vocab), data.num_chunks, synthetic_corpus)
    if hasattr(model, "bind_vocab"):
        model.bind_vocab(data.vocab)
    decoder = _UnkEveryOtherStep(ModelStepDecoder(model.eval(), None), data.vocab.unk_id)
    options = DecodeOptions(beam_size=2, max_len=10, min_len=4, no_repeat_ngram=0, unk="replace")
    summaries = [
        s[0]
        for s in Summarizer(decoder, data.vocab, options).summarize_batch(  # type: ignore[arg-type]
            list(documents_from_split(data, range(4)))
        )
    ]
    assert sum(s.unks_replaced for s in summaries) > 0  # each family's <unk> is replaced by a source word
    for summary in summaries:
        assert not {"<unk>", "</s>", "<s>", "<pad>"} & set(summary.text.split()), (config, summary.text)
