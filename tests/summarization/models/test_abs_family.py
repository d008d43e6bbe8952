"""The ``abs`` model family (issue 15, part A): registry, checkpoint round trip, the family
interface against the ABS parts it wraps, separate article/title vocabularies from the data
pipeline, and ``scg-summarize train`` / ``--resume`` / ``evaluate`` on an ABS run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from scg_summarize.cli import main as cli
from scg_summarize.data import Batch
from scg_summarize.data.field_vocabs import load_field_vocabs, write_field_vocabs
from scg_summarize.data.vocab import Vocab
from scg_summarize.decoding import DecodeOptions, beam_search, load_run
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.models.abs.config import AbsFamilyConfig
from scg_summarize.models.abs.family import AbsSummarizer
from scg_summarize.models.config import ModelConfig
from scg_summarize.models.loading import load_model, read_checkpoint
from scg_summarize.models.registry import FAMILIES, build_model
from scg_summarize.train.checkpoint import save_atomic
from scg_summarize.train.config import Config
from scg_summarize.train.config_loading import load_config
from scg_summarize.train.schema import ConfigError

V = 30


def abs_config(**kw: object) -> AbsFamilyConfig:
    base: dict[str, object] = dict(
        family="abs", vocab_size=V, emb_dim=6, hidden=8, abs_context=3, abs_encoder="attention"
    )
    base.update(kw)
    return AbsFamilyConfig(**base)  # type: ignore[arg-type]


def batch(B: int = 3, M: int = 2, N: int = 5, T: int = 6, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, M, N), generator=g)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    mask[0, 0, 3:] = False  # a gap inside the grid: the packed sentence skips it
    mask[1, 1, :] = False
    src = src.masked_fill(~mask, 0)
    tgt = torch.randint(4, V, (B, T), generator=g)
    tgt[:, 0], tgt[:, -1] = 2, 3
    tgt_mask = torch.ones(B, T, dtype=torch.bool)
    tgt[2, 4:], tgt_mask[2, 4:] = 0, False
    tgt[2, 3] = 3
    return Batch(src=src, src_mask=mask, tgt=tgt, tgt_mask=tgt_mask)


# ----------------------------------------------------------------------------- registry, checkpoints
def test_abs_is_a_registered_family_with_named_option_errors() -> None:
    assert "abs" in FAMILIES.names()
    assert isinstance(build_model(abs_config()), AbsSummarizer)
    with pytest.raises(ValueError, match=r"model.abs_encoder must be one of .*'lstm'"):
        abs_config(abs_encoder="lstm")
    with pytest.raises(ValueError, match=r"model.abs_tgt_vocab must be 0 .* got 3"):
        abs_config(abs_tgt_vocab=3)
    with pytest.raises(ValueError, match="model.tgt_vocab_size: not an option of the 'abs' family"):
        ModelConfig.from_dict({"family": "abs", "vocab_size": V, "tgt_vocab_size": 10})  # the paulus family's
    with pytest.raises(ConfigError) as err:  # the schema reports them all at once
        load_config("tiny-ABS", ["model.abs_context=0", "model.abs_encoder=rnn"])
    assert "model.abs_context" in str(err.value) and "model.abs_encoder" in str(err.value)


@pytest.mark.parametrize("encoder", ["none", "bow", "conv", "attention"])
def test_checkpoint_round_trip_and_the_nll_of_the_wrapped_model(encoder: str, tmp_path: Path) -> None:
    """Saved as the trainer saves, loaded through ``load_model``: same class, parameters, NLL;
    and the family's teacher-forced NLL is the wrapped :class:`AbsModel`'s on the packed input."""
    from scg_summarize.data.chunking import pack_words

    torch.manual_seed(1)
    config = Config(model=abs_config(abs_encoder=encoder))
    model = build_model(config.model).eval()
    save_atomic({"config": config.to_dict(), "model": model.state_dict()}, tmp_path / "best.pt")
    loaded, loaded_config = load_model(tmp_path / "best.pt")
    assert type(loaded) is AbsSummarizer and Config.from_dict(loaded_config).model == config.model
    b = batch()
    with torch.no_grad():
        out = model(b.src, b.src_mask, b.tgt, b.tgt_mask)
        again = loaded.eval()(b.src, b.src_mask, b.tgt, b.tgt_mask).total_nll()
        words, mask, _ = pack_words(b.src, b.src_mask)
        reference, count = model.abs.nll(words, mask, b.tgt)
    assert torch.equal(out.total_nll(), again)
    assert torch.allclose(out.total_nll(), reference, rtol=1e-5) and out.tokens() == count
    assert len(out.attention) == b.tgt.shape[1] - 1
    probs = out.attention[0].chunk_probs
    assert torch.allclose(probs.sum(1), torch.ones(3))


def test_the_family_recombines_hypotheses_with_the_same_window() -> None:
    """The family's state is its window of the last C words (``markov_window`` = C): recombined
    beams keep one hypothesis per window, each scored as the model scores its words (the exactness
    of recombination against brute force is in ``decoding/test_abs_decoding.py``)."""
    torch.manual_seed(2)
    model = build_model(abs_config()).eval()
    b = batch()
    options = DecodeOptions(
        beam_size=4, n_best=4, min_len=4, max_len=4, length_penalty=0.0, no_repeat_ngram=0, unk="allow", recombine=True
    )
    decoder = ModelStepDecoder(model)
    assert decoder.markov_window == 3
    with torch.no_grad():
        found = beam_search(decoder, b, options)
        for example, hyps in enumerate(found):
            assert len({tuple(h.tokens[-3:]) for h in hyps}) == len(hyps) == 4
            for h in hyps:
                state = decoder.reorder(decoder.init_state(b), torch.tensor([example]))
                prev, total = torch.tensor([2]), 0.0
                for w in [*h.tokens, 3]:
                    log_probs, state, _ = decoder.step(state, prev)
                    total, prev = total + float(log_probs[0, w]), torch.tensor([w])
                assert h.score == pytest.approx(total, abs=1e-4)


# ----------------------------------------------------------------------------- separate vocabularies
def test_separate_vocabularies_map_ids_and_restrict_the_output() -> None:
    torch.manual_seed(3)
    src_ids = [0, 1, 2, 3, *range(10, 30)]
    tgt_ids = [0, 1, 2, 3, 4, 5, 6, 7, 12, 20]
    model = AbsSummarizer(abs_config(abs_src_vocab=len(src_ids), abs_tgt_vocab=len(tgt_ids))).eval()
    model.bind_vocabularies(src_ids, tgt_ids)
    assert model.src_map[5].item() == 1 and model.src_map[10].item() == 4  # corpus 5: not an article word
    assert model.tgt_map[20].item() == 9 and model.tgt_map[25].item() == 1
    b = batch()
    with torch.no_grad():
        nll = model(b.src, b.src_mask, b.tgt, b.tgt_mask).total_nll()
        title = b.tgt.clone()
        title[(title > 3) & ~torch.isin(title, torch.tensor(tgt_ids))] = 1  # outside V_y: <unk>
        assert torch.allclose(nll, model(b.src, b.src_mask, title, b.tgt_mask).total_nll())
        found = beam_search(
            ModelStepDecoder(model), b, DecodeOptions(beam_size=3, min_len=5, max_len=5, no_repeat_ngram=0, unk="allow")
        )
    words = {w for hyps in found for h in hyps for w in h.tokens}
    assert words and words <= set(tgt_ids)
    with pytest.raises(ValueError, match="model.abs_tgt_vocab"):
        model.bind_vocabularies(src_ids, tgt_ids[:-1])


def test_prepare_writes_field_vocabularies_and_bad_files_name_file_line_and_field(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    import shutil

    data = tmp_path / "corpus"
    shutil.copytree(synthetic_corpus, data)
    assert load_field_vocabs(data) is None
    fields = write_field_vocabs(data, 5)
    vocab = Vocab.load(data / "vocab.txt")
    loaded = load_field_vocabs(data)
    assert loaded is not None and loaded.src_ids == fields.src_ids and loaded.tgt_ids == fields.tgt_ids
    assert loaded.min_freq == 5 and fields.src_ids[:4] == [0, 1, 2, 3]
    assert len(fields.tgt_ids) < len(vocab) and set(fields.tgt_ids) <= set(range(len(vocab)))
    lines = (data / "tgt_vocab.txt").read_text().splitlines()
    assert all(int(line.split("\t")[1]) >= 5 for line in lines[4:])
    with pytest.raises(ValueError, match="--field-vocab-min-freq"):
        write_field_vocabs(data, 0)
    (data / "tgt_vocab.txt").write_text("\n".join([*lines, "zzzunknownword\t9"]) + "\n")
    with pytest.raises(
        ValueError,
        match=rf"tgt_vocab.txt:{len(lines) + 1} \(title \(target\) vocabulary\): "
        r"'zzzunknownword' is not a word of",
    ):
        load_field_vocabs(data)
    (data / "tgt_vocab.txt").write_text("<pad>\n<s>\n")
    with pytest.raises(ValueError, match=r"tgt_vocab.txt:2 \(title \(target\) vocabulary\): expected the special"):
        load_field_vocabs(data)
    (data / "tgt_vocab.txt").unlink()
    with pytest.raises(ValueError, match=r"src_vocab.txt: the article \(source\) vocabulary has no title"):
        load_field_vocabs(data)


# ----------------------------------------------------------------------------- the CLI
def test_cli_prepare_train_resume_evaluate_an_abs_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, run = tmp_path / "data", tmp_path / "run"
    assert (
        cli(
            [
                "prepare",
                "--format",
                "synthetic",
                "--output",
                str(data),
                "--n-train",
                "40",
                "--n-valid",
                "8",
                "--n-test",
                "8",
                "--field-vocab-min-freq",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        cli(
            [
                "prepare",
                "--format",
                "synthetic",
                "--output",
                str(tmp_path / "bad"),
                "--field-vocab-min-freq",
                "-1",
                "--quiet",
            ]
        )
        == 2
    )
    assert "--field-vocab-min-freq: expected an integer >= 0" in capsys.readouterr().err
    fields = load_field_vocabs(data)
    assert fields is not None
    common = [
        "--config",
        "tiny-ABS",
        "--data",
        str(data),
        "--out",
        str(run),
        "--quiet",
        "--no-test",
        "--set",
        "train.max_steps_per_epoch=2",
        "--set",
        "train.checkpoint_every=1",
    ]
    assert cli(["train", *common, "--set", "train.epochs=1"]) == 0
    stored = json.loads((run / "config.json").read_text())["model"]
    assert stored["family"] == "abs"
    assert (stored["abs_src_vocab"], stored["abs_tgt_vocab"]) == (len(fields.src_ids), len(fields.tgt_ids))
    first = read_checkpoint(run / "checkpoint.pt")
    assert first["step"] == 2
    assert cli(["train", "--out", str(run), "--resume", "--quiet", "--set", "train.epochs=2"]) == 0
    resumed = read_checkpoint(run / "checkpoint.pt")
    assert resumed["step"] == 4 and torch.equal(resumed["model"]["tgt_ids"], torch.tensor(fields.tgt_ids))
    best = read_checkpoint(run / "best.pt")
    valid = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert best["valid"]["ppl"] == min(x["ppl"] for x in valid if x["event"] == "valid")
    loaded = load_run(run)
    assert isinstance(loaded.decoder.model, AbsSummarizer)
    valid_json = tmp_path / "v.json"
    assert cli(["evaluate", "--run", str(run), "--split", "valid", "--quiet", "--output", str(valid_json)]) == 0
    report = capsys.readouterr()
    assert "rouge" in (report.out + report.err).lower()
    # teacher-forced perplexity with separate vocabularies: title words outside V_y are scored as <unk>, as in
    # training (it was inf: the corpus id of such a word has probability 0), so it equals the trainer's number
    ppl = json.loads(valid_json.read_text())["metrics"]["ppl"]
    assert math.isfinite(ppl) and ppl == pytest.approx(best["valid"]["ppl"], rel=1e-4)
    # the test split, with hypothesis recombination from the command line (the valid split above decodes
    # without it): in the settings line and in the result's file name
    assert cli(["evaluate", "--run", str(run), "--split", "test", "--limit", "4", "--quiet", "--recombine"]) == 0
    assert "hypothesis recombination" in capsys.readouterr().err
    assert any("recombine" in p.name for p in (run / "eval").glob("*.json"))


def test_rouge_selection_and_a_sequence_level_objective_run_on_abs(synthetic_corpus: Path, tmp_path: Path) -> None:
    """best.pt by validation ROUGE-L (greedy decoding through the family), and the self-critical
    objective (rollouts through ``forward(task="rollout")``) on an ABS model."""
    from scg_summarize.train import Trainer

    fast = ["train.max_steps_per_epoch=1", "train.epochs=2", "train.log_every=1", "train.select_examples=4"]
    trainer = Trainer(
        load_config("tiny-ABS", [*fast, "train.select_metric=rougeL"]),
        synthetic_corpus,
        tmp_path / "sel",
        quiet=True,
        log=lambda line: None,
    )
    trainer.fit()
    valid = [json.loads(x) for x in (tmp_path / "sel" / "metrics.jsonl").read_text().splitlines()]
    scores = [x["rougeL"] for x in valid if x["event"] == "valid"]
    assert len(scores) == 2 and read_checkpoint(tmp_path / "sel" / "best.pt")["valid"]["rougeL"] == max(scores)
    rl = Trainer(
        load_config("tiny-ABS", [*fast, "train.objective=self_critical", "train.rollout_len=5"]),
        synthetic_corpus,
        tmp_path / "rl",
        quiet=True,
        log=lambda line: None,
    )
    rl.fit()
    train = [json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    rewards = [x["reward"] for x in train if x["event"] == "train"]
    assert rewards and all(0.0 <= r <= 1.0 for r in rewards)
