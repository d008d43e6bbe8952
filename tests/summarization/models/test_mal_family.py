"""MAL as a registered model family (issue 16, item A): the four Table 1 rows as configurations,
the checkpoint round trip, the family interface against teacher forcing, ``scg-summarize train``
with exact ``--resume``, and the Table 4 analysis as ``evaluate --saliency-topk``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from scg_summarize.cli import main as cli_main
from scg_summarize.data import Batch, SummarizationDataset
from scg_summarize.data.batching import collate_examples
from scg_summarize.decoding import load_run
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.decoding.inputs import documents_from_split
from scg_summarize.evaluation.saliency_topk import saliency_top_k
from scg_summarize.models.loading import load_model, read_checkpoint
from scg_summarize.models.mal.model import MALSummarizer, MALTeacherOutput
from scg_summarize.models.registry import FAMILIES, build_model
from scg_summarize.train import Trainer, load_config
from scg_summarize.train.checkpoint import param_digest, save_atomic
from scg_summarize.train.config import Config
from scg_summarize.train.objective import objective_names
from scg_summarize.train.schema import ConfigError

import scg

from ..conftest import ShortRun

V = 40
ROWS = {"MAL-SEQ2SEQ": (False, False), "MAL+SUATT": (True, False), "MAL+UNATT": (False, True), "MAL": (True, True)}
SMALL = ["model.emb_dim=8", "model.hidden=6"]
FAST = [
    *SMALL,
    "train.batch_size=16",
    "train.max_steps_per_epoch=3",
    "train.log_every=1",
    "train.threads=1",
    "data.max_target_len=12",
    "eval.beam_size=2",
    "eval.max_len=8",
    "eval.min_len=1",
]


def _batch(B: int = 3, M: int = 2, N: int = 5, T: int = 6, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, M, N), generator=g)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    mask[0, 1, 2:] = False
    src = src.masked_fill(~mask, 0)
    tgt = torch.cat([torch.full((B, 1), 2), src.flatten(1)[:, 1 : T - 1].clamp(min=4), torch.full((B, 1), 3)], 1)
    return Batch(src=src, src_mask=mask, tgt=tgt, tgt_mask=torch.ones(B, T, dtype=torch.bool))


def _model(name: str, seed: int = 1) -> MALSummarizer:
    torch.manual_seed(seed)
    config = load_config(name, [f"model.vocab_size={V}", *SMALL])
    model = build_model(config.model)
    assert isinstance(model, MALSummarizer)
    model.content[4::2] = True  # every other word is a content word
    return model


def _lines(out: Path, event: str) -> list[dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x for x in rows if x["event"] == event]


# ----------------------------------------------------------------------------- registry and configs
@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_table1_row_is_a_configuration_of_the_mal_family(name: str) -> None:
    assert "mal" in FAMILIES and "mal" in objective_names()
    config = load_config(name)
    assert config.model.family == "mal" and (config.model.suatt, config.model.unatt) == ROWS[name]
    assert config.train.optimizer == "adadelta" and config.train.objective == "mal"
    assert config.eval.decode.beam_size == 10
    model = _model(name)
    assert (model.supervised is not None, model.unsupervised is not None) == ROWS[name]
    assert (
        model.config.ablation
        == {"MAL-SEQ2SEQ": "seq2seq", "MAL+SUATT": "+SuAtt", "MAL+UNATT": "+UnAtt", "MAL": "+MAL"}[name]
    )


def test_bad_mal_options_are_reported_by_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(
            "MAL",
            ["model.pagerank_guard=clip", "model.damping=1.5", "model.temperature_s=0", "train.optimizer=adagrad"],
        )
    text = str(err.value)
    for key in ("model.pagerank_guard", "model.damping", "model.temperature_s", "train.optimizer"):
        assert key in text
    with pytest.raises(ValueError, match="needs model.family = 'mal'"):
        _objective_on_c2f()


def _objective_on_c2f() -> None:
    from scg_summarize.train.objective import build_objective

    class Fake:
        model = build_model(load_config("tiny-STANDARD", [f"model.vocab_size={V}"]).model)

    build_objective("mal", Fake())


def test_training_without_the_vocabulary_is_refused() -> None:
    torch.manual_seed(0)
    model = build_model(load_config("MAL", [f"model.vocab_size={V}", *SMALL]).model).train()
    b = _batch()
    with pytest.raises(ValueError, match="bind_vocab"):
        model(b.src, b.src_mask, b.tgt, b.tgt_mask)


# ----------------------------------------------------------------------------- the family interface
@pytest.mark.parametrize("name", sorted(ROWS))
def test_checkpoint_round_trip(name: str, tmp_path: Path) -> None:
    """Saved as the trainer saves, loaded through ``load_model``: same class, parameters, content
    words, teacher-forced terms and saliency maps."""
    config = load_config(name, [f"model.vocab_size={V}", *SMALL])
    model = _model(name).eval()
    save_atomic({"config": config.to_dict(), "model": model.state_dict()}, tmp_path / "best.pt")
    loaded, loaded_config = load_model(tmp_path / "best.pt")
    assert type(loaded) is MALSummarizer and Config.from_dict(loaded_config).model == config.model
    assert torch.equal(loaded.content, model.content) and int(loaded.content.sum()) == 18
    assert set(read_checkpoint(tmp_path / "best.pt")["model"]) == set(model.state_dict())
    b = _batch()
    with torch.no_grad():
        a, c = (m.eval()(b.src, b.src_mask, b.tgt, b.tgt_mask) for m in (model, loaded))
        maps_a, maps_c = model.saliency_maps(b).maps, loaded.saliency_maps(b).maps
    assert isinstance(a, MALTeacherOutput) and torch.isfinite(a.total_nll())
    assert torch.equal(a.total_nll(), c.total_nll()) and torch.equal(a.loss_s, c.loss_s)
    assert set(maps_a) == {"Lead", *(["SuAtt"] if ROWS[name][0] else []), *(["UnAtt"] if ROWS[name][1] else [])}
    assert all(torch.equal(maps_a[k], maps_c[k]) for k in maps_a)
    assert (a.entropy_s is not None, a.entropy_u is not None) == ROWS[name]
    assert bool((a.loss_s > 0).all()) == ROWS[name][0]


@pytest.mark.parametrize("name", ["MAL", "MAL-SEQ2SEQ"])
def test_step_interface_reproduces_teacher_forcing(name: str) -> None:
    """Σ_t −log p(y_t) stepping through the family interface and the one step adapter (what beam
    search, validation ROUGE and rollouts use) = the teacher-forced L_NLL."""
    model = _model(name).eval()
    b = _batch()
    with torch.no_grad():
        teacher = model(b.src, b.src_mask, b.tgt, b.tgt_mask)
        decoder = ModelStepDecoder(model)
        state = decoder.init_state(b)
        total = torch.zeros(())
        for t in range(b.tgt.shape[1] - 1):
            log_probs, state, _ = decoder.step(state, b.tgt[:, t])
            total = total + log_probs.gather(1, b.tgt[:, t + 1 : t + 2]).sum()
        assert torch.allclose(-total, teacher.total_nll(), rtol=1e-5, atol=1e-4)
        # beam reordering keeps each row's memory: a permutation of the rows gives permuted log-probs
        state = decoder.init_state(b)
        perm = torch.tensor([2, 0, 1])
        moved = decoder.reorder(state, perm)
        lp, _, _ = decoder.step(state, b.tgt[:, 0])
        lp_moved, _, _ = decoder.step(moved, b.tgt[perm, 0])
        assert torch.allclose(lp[perm], lp_moved, atol=1e-6)
    with scg.Graph():
        roll = model(b.src, b.src_mask, b.tgt, b.tgt_mask, task="rollout", max_len=4)
    assert roll.tokens.shape[0] == 3 and roll.tokens.shape[1] <= 4


# ----------------------------------------------------------------------------- training, resume, evaluate
@pytest.fixture(scope="module")
def short_documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic corpus of 4-chunk documents with 8 validation examples: MAL's encoders scan
    every word in Python, so half the words and a fifth of the validation cost its runs half."""
    from scg_summarize.data import make_synthetic_corpus

    out = tmp_path_factory.mktemp("short_documents")
    make_synthetic_corpus(out, n_train=96, n_valid=8, n_test=12, num_chunks=4, seed=7)
    return out


def test_train_resume_select_and_evaluate_with_table4(short_documents: Path, tmp_path: Path) -> None:
    """``scg-summarize train`` on +MAL: per-term metrics, best.pt by validation perplexity, an
    interrupted run resumed to the same parameters, and ``evaluate --saliency-topk``."""

    def fit(out: Path, epochs: int, resume: bool = False) -> Trainer:
        trainer = Trainer(
            load_config("MAL", [*FAST, "train.max_steps_per_epoch=1", f"train.epochs={epochs}"]),
            short_documents,
            out,
            resume=resume,
            quiet=True,
            log=lambda line: None,
        )
        try:
            trainer.fit()
        finally:
            trainer.close()
        return trainer

    full = fit(tmp_path / "full", 2)
    assert isinstance(full.model, MALSummarizer) and bool(full.model.content.any())
    train = _lines(tmp_path / "full", "train")
    assert len(train) == 2  # one step an epoch: the resume below starts at the second
    assert all({"loss_s", "nll_loss", "entropy_s", "entropy_u", "label_rate"} <= set(x) for x in train)
    assert all(0.0 < x["loss_s"] < 5.0 and 0.0 < x["entropy_s"] <= 1.0 + 1e-6 for x in train)
    valid = _lines(tmp_path / "full", "valid")
    assert all({"loss_s", "entropy_s", "entropy_u", "label_rate"} <= set(x) for x in valid)  # (output_terms)
    best = read_checkpoint(tmp_path / "full" / "best.pt")
    assert best["valid"]["ppl"] == min(v["ppl"] for v in valid)

    fit(tmp_path / "cut", 1)
    resumed = fit(tmp_path / "cut", 2, resume=True)
    assert resumed.counters.step == full.counters.step == 2
    assert param_digest(resumed.model) == param_digest(full.model)

    run = load_run(tmp_path / "full")
    assert isinstance(run.decoder, ModelStepDecoder) and isinstance(run.decoder.model, MALSummarizer)
    out = tmp_path / "eval.json"
    assert (
        cli_main(
            [
                "evaluate",
                "--run",
                str(tmp_path / "full"),
                "--split",
                "test",
                "--limit",
                "6",
                "--saliency-topk",
                "5",
                "--output",
                str(out),
                "--quiet",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    table4 = json.loads(out.read_text())["saliency_topk"]
    assert table4["k"] == 5 and table4["count"] == 6 and set(table4["rouge1"]) == {"SuAtt", "UnAtt", "Lead"}
    # the same numbers as the analysis run directly on the model over the same 6 documents
    dataset = SummarizationDataset(short_documents, "test")
    docs = list(documents_from_split(dataset, range(6)))
    batch = collate_examples(docs)
    direct = saliency_top_k(run.decoder.model, [batch], run.vocab.id_to_token, k=5)
    assert direct["rouge1"] == pytest.approx(table4["rouge1"])
    assert all(0.0 <= v <= 100.0 for v in table4["rouge1"].values()) and table4["rouge1"]["Lead"] > 0.0


def test_validation_averages_the_family_terms_over_documents(short_documents: Path, tmp_path: Path) -> None:
    """Validation reports MAL's terms per document (`SummarizerFamily.output_terms`): over
    batches of 3, 3 and 2 documents, L_s and the two entropies equal those of all 8 documents in
    one batch (each a per-document value, so the batching cannot change them); a row without
    +UnAtt leaves entropy_u out; a C2F model reports none."""
    from scg_summarize.train.evaluate import evaluate_nll

    for name, terms in (("MAL", ("loss_s", "entropy_s", "entropy_u")), ("MAL+SUATT", ("loss_s", "entropy_s"))):
        config = load_config(name, [*FAST, "eval.batch_size=3"])
        trainer = Trainer(config, short_documents, tmp_path / name, quiet=True, log=lambda line: None)
        try:
            model, valid = trainer.model.eval(), trainer.valid_set
            got = evaluate_nll(model, valid, config, torch.device("cpu"))
            batch = collate_examples(list(documents_from_split(valid, range(len(valid)))))
            with torch.no_grad():
                whole = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
            assert isinstance(whole, MALTeacherOutput) and whole.loss_s is not None
            want = {"loss_s": float(whole.loss_s.mean()), "entropy_s": whole.entropy_s, "entropy_u": whole.entropy_u}
            for term in terms:
                assert got[term] == pytest.approx(want[term], rel=1e-5), term
            assert ("entropy_u" in got) == ("entropy_u" in terms)
            assert 0.0 < got["label_rate"] < 1.0 and got["loss_s"] > 0.0
        finally:
            trainer.close()
    assert FAMILIES.get("c2f").output_terms == ()


def test_saliency_topk_refuses_a_model_without_saliency(
    finished_short_run: ShortRun, capsys: pytest.CaptureFixture[str]
) -> None:
    # the session's short C2F run (read-only: the refusal comes before anything is decoded or written)
    run = finished_short_run.path
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir())
    assert cli_main(["evaluate", "--run", str(run), "--limit", "2", "--saliency-topk", "10", "--quiet"]) == 2
    assert "has no saliency attention" in capsys.readouterr().err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir()) == before
