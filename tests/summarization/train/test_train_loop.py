"""The training loop end to end on a tiny synthetic corpus: CLI, logs, checkpoints, options."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from scg_summarize.cli import main
from scg_summarize.models.loading import load_model, read_checkpoint
from scg_summarize.train import Trainer, load_config

from ..conftest import SYNTHETIC_SPLITS

FAST = ["train.max_steps_per_epoch=2", "train.epochs=2"]
ONE_STEP = ["train.max_steps_per_epoch=1", "train.epochs=1"]  # for the tests that need a run, not its length


def _trainer(name: str, overrides: list[str], data: Path, out: Path) -> Trainer:
    """A quiet trainer of configuration ``name`` with ``overrides``."""
    return Trainer(load_config(name, overrides), data, out, quiet=True, log=lambda line: None)


def _fit(name: str, data: Path, out: Path, *overrides: str) -> Trainer:
    trainer = _trainer(name, [*FAST, *overrides], data, out)
    trainer.fit()
    return trainer


def test_cli_train_writes_logs_checkpoints_and_results(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    status = main(
        [
            "train",
            "--config",
            "tiny-C2F+MULTI2",
            "--data",
            str(synthetic_corpus),
            "--out",
            str(out),
            "--quiet",
            "--rouge",
            *[a for kv in [*FAST, "eval.min_len=3"] for a in ("--set", kv)],
        ]
    )
    assert status == 0
    assert {p.name for p in out.iterdir()} >= {
        "checkpoint.pt",
        "best.pt",
        "metrics.jsonl",
        "config.json",
        "data.json",
        "results.json",
        "test.summaries.jsonl",
    }
    assert not list(out.glob("*.tmp"))  # atomic writes leave no temporary files
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in lines if x["event"] == "train"]
    valid = [x for x in lines if x["event"] == "valid"]
    assert [x["step"] for x in valid] == [2, 4] and lines[-1]["event"] == "end"
    assert all({"loss", "ppl", "tok_per_s", "lr"} <= set(x) for x in train)
    assert all(x["soft_frac"] == 0.0 for x in train)  # C2F trains through the scg surrogate
    results = json.loads((out / "results.json").read_text())  # the shared evaluation's record
    metrics = results["metrics"]
    assert {"ppl", "rouge1", "rouge2", "rougeL", "coarse_accuracy", "coarse_entropy", "fraction_read"} <= set(metrics)
    assert 0.0 < metrics["fraction_read"] < 0.5  # the argmax chunk of 8 (at every step: a few chunks)
    assert 0.0 <= metrics["coarse_accuracy"] <= 1.0 and metrics["mean_length"] >= 3
    assert results["examples"] == SYNTHETIC_SPLITS["test"] and results["name"] == "tiny-C2F+MULTI2"
    err = capsys.readouterr().err
    for phase in ("test evaluation (perplexity): done", "test evaluation (decoding and ROUGE): done"):
        assert f"train: {phase}" in err, err  # --quiet keeps each phase's first and last line
    *_, head, _, values = err.strip().splitlines()  # the last line: a table, not a JSON dict
    tf = dict(zip(head.strip("| ").split(" | "), values.strip("| ").split(" | ")))
    assert 0.0 < float(tf["words read"].rstrip("%")) < 30.0 and float(tf["PPL"]) > 1.0
    model, config = load_model(out / "best.pt")
    assert config["name"] == "tiny-C2F+MULTI2" and model.config.multi == 2


def test_cli_train_lists_configs_and_reports_errors(synthetic_corpus: Path, tmp_path: Path, capsys) -> None:
    assert main(["train", "--list"]) == 0
    assert "C2F+MULTI2" in capsys.readouterr().out
    assert main(["train", "--config", "NOPE", "--data", str(synthetic_corpus), "--out", str(tmp_path)]) == 2
    assert "unknown configuration" in capsys.readouterr().err
    assert main(["train", "--config", "tiny-STANDARD"]) == 2
    assert (
        main(["train", "--config", "tiny-C2F+PRETRAIN", "--data", str(synthetic_corpus), "--out", str(tmp_path / "p")])
        == 2
    )
    assert "init_from" in capsys.readouterr().err
    rl = ["train", "--config", "tiny-PAULUS-RL", "--data", str(synthetic_corpus), "--out", str(tmp_path / "rl")]
    assert main(rl) == 2  # its description says "from an ML checkpoint": it trained from scratch without a word
    assert (
        "tiny-PAULUS-RL starts from a trained model (train.pretrain): pass --set train.init_from"
        in capsys.readouterr().err
    )


def test_pretrain_starts_c2f_from_a_hier_checkpoint(synthetic_corpus: Path, tmp_path: Path) -> None:
    hier = _fit("tiny-HIER", synthetic_corpus, tmp_path / "hier", *ONE_STEP)
    init = f"train.init_from='{tmp_path / 'hier' / 'best.pt'}'"
    c2f = _trainer("tiny-C2F+PRETRAIN", [*FAST, init], synthetic_corpus, tmp_path / "c2f")
    best = read_checkpoint(tmp_path / "hier" / "best.pt")["model"]
    for name, value in c2f.model.state_dict().items():
        assert torch.equal(value, best[name]), name
    assert hier.model.state_dict().keys() == c2f.model.state_dict().keys()


def test_weights_of_another_vocabulary_are_refused(synthetic_corpus: Path, tmp_path: Path) -> None:
    """A checkpoint records its vocabulary's digest: weights trained on another corpus whose
    vocabulary has the same size passed every shape check and were read with other words (by
    ``summarize --checkpoint`` and ``train.init_from``), without a word."""
    from scg_summarize.data import SummarizationDataset
    from scg_summarize.decoding import RunLoadError, load_run

    _fit("tiny-HIER", synthetic_corpus, tmp_path / "hier", *ONE_STEP)
    state = read_checkpoint(tmp_path / "hier" / "best.pt")
    assert state["vocab"] == SummarizationDataset(synthetic_corpus, "train").vocab.digest()
    foreign = tmp_path / "foreign.pt"
    torch.save({**state, "vocab": "0" * 16}, foreign)  # the same weights, another vocabulary's record
    assert load_run(tmp_path / "hier", checkpoint=tmp_path / "hier" / "best.pt").model == "tiny-HIER"
    with pytest.raises(
        RunLoadError,
        match=r"foreign.pt: the weights were trained with another vocabulary than .*vocab.txt \((\d+) words each",
    ):
        load_run(tmp_path / "hier", checkpoint=foreign)
    init = f"train.init_from='{foreign}'"
    with pytest.raises(ValueError, match=r"train.init_from: .*foreign.pt: .*another vocabulary than the corpus"):
        _trainer("tiny-C2F+PRETRAIN", [*FAST, init], synthetic_corpus, tmp_path / "c2f")


def test_alternate_mixes_soft_and_sampled_minibatches(synthetic_corpus: Path, tmp_path: Path) -> None:
    trainer = _fit(
        "tiny-C2F+ALTERNATE",
        synthetic_corpus,
        tmp_path / "alt",
        "train.max_steps_per_epoch=3",  # seed 1: soft, sampled, soft
        "train.epochs=1",
        "train.log_every=1",
    )
    lines = [json.loads(line) for line in (tmp_path / "alt" / "metrics.jsonl").read_text().splitlines()]
    soft = [x["soft_frac"] for x in lines if x["event"] == "train"]
    assert len(soft) == 3 and 0 < sum(soft) < 3
    assert trainer.baseline.value("nll", 0) != 0.0


def test_soft_model_uses_sgd_groups_and_lr_decay(synthetic_corpus: Path, tmp_path: Path) -> None:
    trainer = _fit(
        "tiny-HIER",
        synthetic_corpus,
        tmp_path / "sgd",
        "train.optimizer=sgd",
        "train.lr=1.0",
        "train.chunk_encoder_lr_scale=0.1",
        "train.max_steps_per_epoch=1",
        "train.epochs=3",
    )
    groups = {g["name"]: g["lr"] for g in trainer.optimizer.param_groups}
    assert set(groups) == {"main", "chunk_encoder"}
    assert groups["chunk_encoder"] == pytest.approx(0.1 * groups["main"])
    chunk_ids = {id(p) for p in trainer.model.chunk_encoder_parameters()}
    assert chunk_ids == {id(p) for p in trainer.optimizer.param_groups[1]["params"]}
    valid = [json.loads(x) for x in (tmp_path / "sgd" / "metrics.jsonl").read_text().splitlines()]
    lrs = [x["lr"] for x in valid if x["event"] == "valid"]
    assert all(b in (a, a * 0.5) for a, b in itertools.pairwise(lrs))


def test_word2vec_initialization(synthetic_corpus: Path, tmp_path: Path) -> None:
    from scg_summarize.data import Vocab

    vocab = Vocab.load(synthetic_corpus / "vocab.txt")
    word = vocab.tokens[10]
    path = tmp_path / "vec.txt"
    path.write_text(f"2 16\n{word} " + " ".join(["0.5"] * 16) + "\nnotaword " + " ".join(["1"] * 16) + "\n")
    trainer = _trainer("tiny-STANDARD", [*FAST, f"train.word2vec='{path}'"], synthetic_corpus, tmp_path / "w2v")
    row = trainer.model.src_embedding.weight[10]
    assert torch.all(row == 0.5)
    assert torch.all(trainer.model.tgt_embedding.weight[10] == 0.5)
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{word} 1 2 3\n")
    with pytest.raises(ValueError, match="expected a word and 16 numbers"):
        _trainer("tiny-STANDARD", [f"train.word2vec='{bad}'"], synthetic_corpus, tmp_path / "b")


def test_word2vec_fills_each_family_s_tables_or_is_refused(synthetic_corpus: Path, tmp_path: Path) -> None:
    """Paulus with its own target vocabulary: the target table covers the first
    ``tgt_vocab_size`` corpus words and gets their vectors, the source table every word's. ABS
    embeds its words in its NNLM's tables, which word2vec does not fill: refused by the option's
    name (it was an AttributeError from the model, and Paulus's an IndexError)."""
    from scg_summarize.data import Vocab

    vocab = Vocab.load(synthetic_corpus / "vocab.txt")
    path = tmp_path / "vec.txt"  # word i's vector: eight times i
    path.write_text("".join(f"{w} " + " ".join([str(i)] * 8) + "\n" for i, w in enumerate(vocab.tokens) if i))
    paulus = ["model.tgt_vocab_size=20", "model.emb_dim=8", "model.hidden=8", "model.share_embeddings=false"]
    trainer = _trainer("PAULUS-ML", [*paulus, f"train.word2vec='{path}'"], synthetic_corpus, tmp_path / "paulus")
    try:
        src, tgt = trainer.model.src_embedding.weight, trainer.model.tgt_embedding.weight
        assert tgt.shape[0] == 20 < src.shape[0] == len(vocab)
        rows = torch.arange(1, len(vocab), dtype=src.dtype)
        assert torch.equal(src[1:], rows[:, None].expand(-1, 8))
        assert torch.equal(tgt[1:], rows[:19, None].expand(-1, 8))
    finally:
        trainer.close()
    with pytest.raises(ValueError, match=r"train.word2vec: the 'abs' family has no word embedding tables"):
        _trainer("ABS", [f"train.word2vec='{path}'"], synthetic_corpus, tmp_path / "abs")


def test_model_sizes_that_contradict_the_corpus_are_refused_by_name(synthetic_corpus: Path, tmp_path: Path) -> None:
    """A vocabulary size other than the corpus's (it was an IndexError from the embedding), and +POS
    built for fewer chunks than the batches have: each error names the option."""
    with pytest.raises(ValueError, match=r"model.vocab_size = 5, but the corpus vocabulary has \d+ words"):
        _trainer("tiny-C2F", ["model.vocab_size=5"], synthetic_corpus, tmp_path / "vocab")
    with pytest.raises(ValueError, match=r"model.num_chunks = 2, but the corpus has 8 chunks per document"):
        _trainer("tiny-C2F+POS", [*FAST, "model.num_chunks=2"], synthetic_corpus, tmp_path / "pos")
    with pytest.raises(
        ValueError, match=r"model.num_chunks = 9, but the corpus has 8"
    ):  # (no part read it: it was kept)
        _trainer("tiny-C2F", [*FAST, "model.num_chunks=9"], synthetic_corpus, tmp_path / "unused")
    from scg_summarize.models.c2f.chunk_encoders import ConvChunkEncoder, WithPosition

    pos = WithPosition(ConvChunkEncoder(4, filters=3, width=2), num_chunks=2, pos_dim=2)  # a model fed wider documents
    with pytest.raises(ValueError, match=r"\+POS was built for 2 chunks \(model.num_chunks\), got a batch with 3"):
        pos(torch.ones(1, 3, 5, dtype=torch.long), torch.ones(1, 3, 5, dtype=torch.bool), torch.zeros(1, 3, 5, 4))


def test_an_option_the_runs_objective_does_not_read_is_refused(synthetic_corpus: Path, tmp_path: Path) -> None:
    """HIER trains by maximum likelihood: train.reward_scale and train.discount (C2F's REINFORCE)
    were accepted and changed nothing; model.test_k > 1 likewise for soft attention."""
    for option in ("train.reward_scale=5", "train.discount=0.9"):
        key = option.split("=")[0]
        with pytest.raises(ValueError, match=rf"{key} = .* is read by the c2f_reinforce objective only.*'mle'"):
            _trainer("tiny-HIER", [*FAST, option], synthetic_corpus, tmp_path / key)
    _trainer("tiny-C2F", [*FAST, "train.reward_scale=5"], synthetic_corpus, tmp_path / "c2f").close()
    # C2F+SCST's mixed objective reads them in its maximum-likelihood term (C2F's surrogate): refused before
    scst = ["train.discount=0.9", "train.reward_scale=0.5"]
    _trainer("tiny-C2F+SCST", [*FAST, *scst], synthetic_corpus, tmp_path / "scst").close()
    with pytest.raises(
        ValueError, match=r"model.test_k: reading the top k > 1 chunks .* needs model.attention = 'c2f'"
    ):
        load_config("tiny-HIER", ["model.test_k=3"])


def test_a_run_is_self_contained_for_summarizing_new_text(tmp_path: Path, capsys) -> None:
    """The run keeps its vocabulary and preprocessing options: `summarize --run` needs no corpus."""
    import shutil

    from scg_summarize.data import make_synthetic_corpus

    data = tmp_path / "data"
    make_synthetic_corpus(data, n_train=8, n_valid=2, n_test=2, seed=3)  # one step of 8
    first = (data / "test" / "text.jsonl").read_text(encoding="utf-8").splitlines()[0]
    words = " ".join(json.loads(first)["src_sentences"][:3])
    out = tmp_path / "run"
    _fit("tiny-STANDARD", data, out, "model.copy=true", *ONE_STEP)
    record = json.loads((out / "data.json").read_text())
    assert (out / "vocab.txt").read_text() == (data / "vocab.txt").read_text()
    assert record["prep_options"]["num_chunks"] > 0
    shutil.rmtree(data)
    text = tmp_path / "doc.txt"
    text.write_text(words + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["summarize", "--run", str(out), "--input", str(text), "--max-len", "5"]) == 0
    summary = capsys.readouterr().out.strip()
    assert summary and len(summary.split()) <= 5
