"""The MAL summarizer end to end: ablation rows, the objective's terms (eq. 19-21), decoding
through the one step adapter (beam search, teacher forcing through the protocol) and the Table 4
analysis."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.data import Batch, SummarizationDataset, make_dataloader, make_synthetic_corpus
from scg_summarize.data.chunking import pack_words
from scg_summarize.decoding import DecodeOptions, ModelStepDecoder, beam_search
from scg_summarize.evaluation.saliency_topk import saliency_top_k, top_k_rouge1, top_k_words
from scg_summarize.models.mal import MALConfig, MALSummarizer, MALTeacherOutput, saliency_loss
from scg_summarize.models.mal.saliency import entropy_floor, normalized_entropy

pytest.importorskip("stop_words")

V = 30


def _content() -> torch.Tensor:
    content = torch.ones(V, dtype=torch.bool)
    content[:8] = False  # specials and a few "stopwords"
    return content


def _batch(seed: int = 0) -> Batch:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 2, 6), generator=gen)
    src_mask = torch.ones_like(src, dtype=torch.bool)
    src_mask[1, 1, 2:] = False  # a shorter document (grid layout: padding at the end)
    src_mask[2, 1:] = False
    src = src * src_mask
    tgt = torch.randint(4, V, (3, 5), generator=gen)
    tgt[:, 0] = 2
    tgt_mask = torch.ones_like(tgt, dtype=torch.bool)
    tgt_mask[2, 3:] = False
    tgt[:, -1] = torch.where(tgt_mask[:, -1], 3, 0)
    tgt[2, 2] = 3
    tgt = tgt * tgt_mask
    return Batch(src=src, src_mask=src_mask, tgt=tgt, tgt_mask=tgt_mask)


def _forward(model: MALSummarizer, batch: Batch) -> Any:
    return model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)


def _model(ablation: str = "+MAL", **overrides: object) -> MALSummarizer:
    torch.manual_seed(0)
    config = MALConfig.for_ablation(ablation, vocab_size=V, emb_dim=6, hidden=5, init_range=0.5, **overrides)
    model = MALSummarizer(config)
    model.content.copy_(_content())
    return model


def _loss(out: MALTeacherOutput) -> torch.Tensor:
    """L (eq. 21) averaged over the documents: mean_b(L_s(b) + L_NLL(b))."""
    assert out.loss_s is not None
    return (out.loss_s + torch.stack(out.step_nll, 1).sum(1)).mean()


@pytest.mark.parametrize(
    "ablation, parts",
    [("seq2seq", (False, False)), ("+SuAtt", (True, False)), ("+UnAtt", (False, True)), ("+MAL", (True, True))],
)
def test_ablation_rows_build_their_parts(ablation: str, parts: tuple[bool, bool]) -> None:
    model = _model(ablation)
    assert model.config.ablation == ablation
    assert (model.supervised is not None, model.unsupervised is not None) == parts
    out = _forward(model, _batch())
    assert (out.entropy_s is not None, out.entropy_u is not None) == parts
    if not parts[0]:
        assert float(out.loss_s.abs().sum()) == 0.0


def test_config_errors_name_the_option() -> None:
    with pytest.raises(ValueError, match="unknown MAL ablation"):
        MALConfig.for_ablation("+ALL")
    with pytest.raises(ValueError, match="model.pagerank_guard"):
        MALConfig(pagerank_guard="clip")
    with pytest.raises(ValueError, match="model.temperature_s"):
        MALConfig(temperature_s=0.0)
    with pytest.raises(ValueError, match="model.beam: not an option of the 'mal' family"):
        MALConfig.from_dict({"beam": 10})


def test_objective_terms_and_the_step_protocol_agree() -> None:
    """L = mean_b(L_s + L_NLL) (eq. 21), where L_NLL (eq. 20) is the sum of the step decoder's
    teacher-forced −log p (the path beam search uses) and L_s is eq. (19) on the labels."""
    model = _model()
    batch = _batch()
    out = _forward(model, batch)
    model.eval()
    with torch.no_grad():
        out = _forward(model, batch)
        dec = ModelStepDecoder(model)
        state = dec.init_state(batch)
        tgt, mask = batch.tgt, batch.tgt_mask
        doc_nll = torch.zeros(3)
        for t in range(tgt.shape[1] - 1):
            logp, state, _ = dec.step(state, tgt[:, t])
            doc_nll -= logp.gather(1, tgt[:, t + 1 : t + 2]).squeeze(1) * mask[:, t + 1]
        enc = model.encode_source(batch.src, batch.src_mask)
        labels = model.labels(enc, tgt, mask)
        assert enc.saliency is not None
        # eq. (19) written out, not saliency_loss itself: −(1/m) Σ_real [r log r̂ + (1 − r) log(1 − r̂)]
        r_hat, real = torch.sigmoid(enc.saliency.logits.double()), enc.mask.double()
        bce = -(labels * r_hat.log() + (1 - labels) * (1 - r_hat).log())
        loss_s = torch.where(enc.mask, bce, 0.0).sum(-1) / real.sum(-1)
        assert torch.allclose(saliency_loss(enc.saliency.logits, labels, enc.mask).double(), loss_s, rtol=1e-5)
    assert out.loss_s is not None
    assert float(out.total_nll()) == pytest.approx(float(doc_nll.sum()), rel=1e-5)
    assert torch.allclose(out.loss_s.double(), loss_s, rtol=1e-6)
    assert float(_loss(out)) == pytest.approx(float((loss_s + doc_nll).mean()), rel=1e-5)
    assert out.tokens() == int(mask[:, 1:].sum())
    # labels: content words of the source found in the target
    src, tgt0 = enc.src[0].tolist(), set(tgt[0][mask[0]].tolist())
    assert labels[0].tolist() == [float(w >= 8 and w in tgt0) for w in src]


def test_extra_padding_changes_nothing() -> None:
    model = _model().eval()
    batch = _batch()
    padded = replace(
        batch,
        src=torch.cat([batch.src, torch.zeros(3, 1, 6, dtype=torch.long)], 1),
        src_mask=torch.cat([batch.src_mask, torch.zeros(3, 1, 6, dtype=torch.bool)], 1),
    )
    with torch.no_grad():
        a, b = _forward(model, batch), _forward(model, padded)
    assert float(_loss(a)) == pytest.approx(float(_loss(b)), rel=1e-6)


def test_gradients_reach_every_part() -> None:
    model = _model()
    _loss(_forward(model, _batch())).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name


def test_literal_supervised_attention_is_near_uniform_and_the_temperature_sharpens_it() -> None:
    literal, sharp = _model(), _model(temperature_s=0.05)
    sharp.load_state_dict(literal.state_dict())
    batch = _batch()
    with torch.no_grad():
        a = literal.encode_source(batch.src, batch.src_mask)
        b = sharp.encode_source(batch.src, batch.src_mask)
    assert a.saliency is not None and b.saliency is not None
    lengths = a.mask.sum(-1).tolist()
    ent_a = normalized_entropy(a.saliency.weights, a.mask)
    for row, m in enumerate(lengths):
        assert float(ent_a[row]) >= entropy_floor(int(m)) - 1e-6  # the bound of eq. (8)
    assert torch.equal(a.saliency.probs, b.saliency.probs)  # same classifier, other softmax
    assert float(normalized_entropy(b.saliency.weights, b.mask).mean()) < float(ent_a.mean()) - 0.02


def test_beam_search_with_beam_ten() -> None:
    model = _model()
    batch = _batch()
    hyps = beam_search(
        ModelStepDecoder(model),
        batch,
        DecodeOptions(beam_size=10, max_len=6, n_best=3),
    )
    assert len(hyps) == 3
    for per_example in hyps:
        assert 1 <= len(per_example) <= 3
        assert all(0 < w < V and w not in (0, 2, 3) for h in per_example for w in h.tokens)
        assert all(math.isfinite(h.log_prob) for h in per_example)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mal") / "synthetic"
    make_synthetic_corpus(out, n_train=64, n_valid=16, n_test=8, num_chunks=4, chunk_len=8, seed=0)
    return out


def test_top_k_words() -> None:
    tokens = ["the", "zlib", "library", "</s>", "zlib", "fast", "data"]
    scores = [0.9, 0.5, 0.4, 1.0, 0.8, float("-inf"), 0.1]
    assert top_k_words(tokens, scores, k=3) == ["the", "zlib", "library"]
    assert top_k_words(tokens, scores, k=10) == ["the", "zlib", "library", "data"]  # -inf and specials skipped
    with pytest.raises(ValueError, match="k must be positive"):
        top_k_words(tokens, scores, k=0)


def test_top_k_rouge1_on_a_hand_made_pair() -> None:
    pytest.importorskip("rouge_score")
    result = top_k_rouge1([["zlib", "library", "fast", "data"]], [["a zlib library"]])
    # 2 of 4 predicted words in a 3-word reference: P = 1/2, R = 2/3, F = 4/7
    assert result.scores["rouge1"] == pytest.approx(100 * 4 / 7)


def test_saliency_top_k_on_a_model(corpus: Path) -> None:
    pytest.importorskip("rouge_score")
    dataset = SummarizationDataset(corpus, "valid")
    model = MALSummarizer.for_vocab(MALConfig(emb_dim=6, hidden=5), dataset.vocab).eval()
    out = saliency_top_k(model, make_dataloader(dataset, 8, shuffle=False), dataset.vocab.id_to_token, k=5)
    assert out["count"] == len(dataset)
    assert set(out["rouge1"]) == {"SuAtt", "UnAtt", "Lead"}
    assert all(0.0 <= v <= 100.0 for v in out["rouge1"].values())
    assert all(len(words) <= 5 for words in out["examples"]["UnAtt"])
    # Lead: the first content words in order
    item = dataset[0]
    src, mask, _ = pack_words(item.src[None], item.src_mask[None], 100)
    first = []
    for i in src[0][model.nodes(src, mask)[0]].tolist():
        word = dataset.vocab.id_to_token(i)
        if word not in first:
            first.append(word)
    assert out["examples"]["Lead"][0] == first[:5]


def test_conditioning_measurement_on_a_corpus(corpus: Path) -> None:
    from scg_summarize.models.mal.conditioning import measure_conditioning

    dataset = SummarizationDataset(corpus, "valid", with_text=False)
    torch.manual_seed(0)
    model = MALSummarizer.for_vocab(MALConfig(emb_dim=6, hidden=5), dataset.vocab)
    result = measure_conditioning(model, dataset, docs=8)
    assert result["documents"] == 8
    assert set(result["guards"]) == {"none", "softplus", "abs"}
    for guard in ("softplus", "abs"):  # provably cond ≤ 19 with non-negative weights
        assert result["guards"][guard]["cond>100"] == 0.0
        assert result["guards"][guard]["negative_p"] == 0.0
    assert result["guards"]["none"]["cond_median"] > result["guards"]["softplus"]["cond_median"]
