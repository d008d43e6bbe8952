"""The maths of the summarizer's training objectives, each stated as a property that fails when a
sign, mask, normaliser or coin is wrong (issue 30).

* C2F: the surrogate's gradient is Σ_t ∇c_t + λ Σ_t ∇log p(ℓ_t) · A_t with the discounted
  reward-to-go A_t = Σ_{s≥t} γ^{s−t} (c_s − b_s), checked against that formula written out from
  the graph's own nodes (γ = 0.5, λ = 0.7), and padding steps contribute nothing.
* +ALTERNATE: the soft-minibatch coin comes up with probability p (binomial standard error).
* Gradient renormalisation and the normalisers, through ``Trainer.train_step`` with a recording
  objective: the update is −lr · g · min(1, max_norm/‖g‖); the token normaliser counts the
  predicted tokens (not the ``<s>`` column); two simulated DDP ranks (each its half batch, the
  normaliser all-reduced and divided by the world size, gradients averaged as DDP does) give the
  one-process gradient, in both ``normalize`` modes.
* Paulus: the teacher-forced NLL and its gradient are padding invariant; the fed-sample coin feeds
  a sample with probability p (its expected effect on step 1's input, computed from step 0's
  distribution, within 5 standard errors); evaluation never feeds samples.
* MAL: L_s against the hand formula −(1/m) Σ_real [r log r̂ + (1 − r) log(1 − r̂)], padding
  invariant in value and gradient; the ``mal`` objective is batch-split invariant.
* The extended vocabulary: ``to_input`` / ``to_corpus`` at the boundary id V_t.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from scg_summarize.data import Batch
from scg_summarize.models.common.extended_vocab import to_corpus, to_input
from scg_summarize.models.mal.saliency import saliency_loss
from scg_summarize.models.paulus.config import PaulusConfig
from scg_summarize.models.registry import build_model
from scg_summarize.train import load_config
from scg_summarize.train.ddp import DistContext
from scg_summarize.train.loop import Trainer
from scg_summarize.train.mal_objective import mal_objective
from scg_summarize.train.objective import COARSE, StepResult, c2f_objective
from scg_summarize.train.optim import clip_gradients
from scg_summarize.train.run_state import RunCounters

import scg

from ..models_helpers import tiny_c2f_config

V = 9


def _c2f_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(tiny_c2f_config(V, emb_dim=4, hidden=5)).double()


def _c2f_batch() -> Batch:
    g = torch.Generator().manual_seed(3)
    src = torch.randint(4, V, (3, 2, 4), generator=g)
    tgt = torch.randint(4, V, (3, 5), generator=g)
    tgt[:, 0] = 2
    tgt_mask = torch.ones_like(tgt, dtype=torch.bool)
    tgt_mask[1, 3:] = False  # a shorter summary: two padding steps
    tgt[1, 2], tgt[1, 3:] = 3, 0
    tgt[[0, 2], -1] = 3
    return Batch(src=src, src_mask=torch.ones_like(src, dtype=torch.bool), tgt=tgt, tgt_mask=tgt_mask)


def _forward(model: Any, batch: Batch) -> Any:
    return model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)


def _grads(value: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    grads = torch.autograd.grad(value, params, retain_graph=True, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])


# ----------------------------------------------------------------------------- +ALTERNATE's coin
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_alternate_coin_comes_up_soft_with_probability_p(p: float) -> None:
    steps = 3000
    trainer = SimpleNamespace(
        config=SimpleNamespace(train=SimpleNamespace(alternate=p, seed=7)), counters=SimpleNamespace(step=0)
    )
    soft = 0
    for step in range(steps):
        trainer.counters.step = step
        soft += Trainer._soft_minibatch(trainer)  # type: ignore[arg-type]
    se = math.sqrt(p * (1 - p) / steps)
    assert abs(soft / steps - p) <= 5 * se  # p = 0: exactly never; 1 - p (an inverted coin) is 40 SE away


# ----------------------------------------------------------------------------- train_step: renorm and normalisers
class _Ranks(DistContext):
    """Rank ``rank`` of ``world`` simulated in one process: ``all_reduce`` sums the values every rank
    recorded (run each rank once to record, then again to use the sums)."""

    def __init__(self, rank: int, world: int, book: dict[int, list[float]]) -> None:
        super().__init__(rank, world, 0)
        self.book = book

    def all_reduce(self, values: list[float], device: torch.device) -> list[float]:
        self.book[self.rank] = list(values)
        if len(self.book) < self.world:
            return [v * self.world for v in values]
        return [sum(self.book[r][i] for r in range(self.world)) for i in range(len(values))]


def _step(
    batch: Batch,
    normalize: str,
    *,
    world: int = 1,
    rank: int = 0,
    book: dict | None = None,
    max_grad_norm: float = 0.0,
    theta: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float, torch.Tensor]:
    """One ``Trainer.train_step`` (SGD, lr 1) on θ with the loss Σ_{b,t real} θ·w_bt / normaliser;
    returns (θ's gradient, the normaliser, θ after the step)."""
    theta = torch.nn.Parameter(torch.tensor([0.5, -0.25], dtype=torch.float64) if theta is None else theta.clone())
    seen: dict[str, float] = {}

    def objective(shard: Batch, normalizer: float) -> StepResult:
        seen["normalizer"] = normalizer
        real = shard.tgt_mask[:, 1:]
        assert shard.index is not None
        per_token = (_token_weights()[shard.index][:, 1:, :] * theta).sum(-1).masked_fill(~real, 0.0)
        return StepResult(per_token.sum() / normalizer, per_token.detach().sum(), real.sum(), None)

    module = torch.nn.Module()
    module.theta = theta
    train = SimpleNamespace(normalize=normalize, max_grad_norm=max_grad_norm)
    stub = SimpleNamespace(
        config=SimpleNamespace(train=train, data=SimpleNamespace(regrid=None, pad_targets=0)),
        dist=_Ranks(rank, world, {} if book is None else book),
        device=torch.device("cpu"),
        net=module,
        model=module,
        objective=objective,
        counters=RunCounters(),
        last_finite=None,
        optimizer=torch.optim.SGD([theta], lr=1.0),
        captured=None,
    )
    stub.step_inputs = lambda b: Trainer.step_inputs(stub, b)  # type: ignore[arg-type]
    stub.forward_backward = lambda b, n: Trainer.forward_backward(stub, b, n)  # type: ignore[arg-type]
    Trainer.train_step(stub, batch)  # type: ignore[arg-type]
    assert theta.grad is not None
    return theta.grad.clone(), seen["normalizer"], theta.detach().clone()


_TOKEN_LENGTHS = [6, 2, 5, 3]  # <s> ... </s>; the ranks (rows 0::2 and 1::2) get 11 and 5 columns


def _token_weights() -> torch.Tensor:
    """w ``(B, T, 2)``: the loss of example b at position t is θ·w_bt (rows found by ``batch.index``)."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(len(_TOKEN_LENGTHS), max(_TOKEN_LENGTHS), 2, generator=g, dtype=torch.float64)


def _token_batch() -> tuple[Batch, list[int]]:
    lengths, B = _TOKEN_LENGTHS, len(_TOKEN_LENGTHS)
    mask = torch.tensor([[t < n for t in range(max(lengths))] for n in lengths])
    src = torch.zeros(B, 1, 1)
    batch = Batch(src=src, src_mask=src > 0, tgt=torch.where(mask, 5, 0), tgt_mask=mask, index=torch.arange(B))
    return batch, lengths


def test_token_normaliser_counts_the_predicted_tokens_not_the_bos_column() -> None:
    batch, lengths = _token_batch()
    grad, normalizer, _ = _step(batch, "tokens")
    predicted = sum(n - 1 for n in lengths)  # every word and </s>, never <s>
    assert normalizer == predicted
    real = batch.tgt_mask[:, 1:].unsqueeze(-1)
    assert torch.allclose(grad, (_token_weights()[:, 1:] * real).sum((0, 1)) / predicted, atol=1e-12)
    _, per_batch, _ = _step(batch, "batch")
    assert per_batch == len(lengths)


@pytest.mark.parametrize("normalize", ["tokens", "batch"])
def test_two_ranks_on_half_batches_equal_one_process_on_the_batch(normalize: str) -> None:
    batch, _ = _token_batch()
    single, _, _ = _step(batch, normalize)
    book: dict[int, list[float]] = {}
    for rank in (0, 1):  # record each rank's count
        _step(batch, normalize, world=2, rank=rank, book=book)
    grads = [_step(batch, normalize, world=2, rank=rank, book=book)[0] for rank in (0, 1)]
    assert not torch.allclose(grads[0], grads[1])  # the halves differ: the check is not symmetric by luck
    assert torch.allclose((grads[0] + grads[1]) / 2, single, atol=1e-12)  # DDP averages the ranks' gradients


def test_gradient_renormalisation_is_applied_to_the_update() -> None:
    batch, _ = _token_batch()
    start = torch.tensor([0.5, -0.25], dtype=torch.float64)
    grad, _, free = _step(batch, "tokens", theta=start)
    norm = float(grad.norm())
    assert torch.allclose(free, start - grad, atol=1e-12)  # no renormalisation: θ − lr·g
    _, _, clipped = _step(batch, "tokens", max_grad_norm=norm / 4, theta=start)
    assert torch.allclose(clipped, start - grad / 4, atol=1e-9)  # g · (max_norm / ‖g‖)
    _, _, loose = _step(batch, "tokens", max_grad_norm=norm * 4, theta=start)
    assert torch.allclose(loose, free, atol=1e-12)  # below the bound: unchanged


def test_clip_gradients_renormalises_to_the_bound_and_returns_the_norm_before() -> None:
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(1))
    a.grad, b.grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])
    norm = clip_gradients([a, b], 1.0)
    assert isinstance(norm, torch.Tensor) and norm.dim() == 0 and float(norm) == pytest.approx(5.0)  # (no host read)
    assert torch.allclose(a.grad, torch.tensor([0.6, 0.0])) and torch.allclose(b.grad, torch.tensor([0.8]))
    assert clip_gradients([a, b], 0.0) is None and torch.allclose(b.grad, torch.tensor([0.8]))


# ----------------------------------------------------------------------------- Paulus
PV = 12


def _paulus(feed: float = 0.0) -> torch.nn.Module:
    torch.manual_seed(0)
    config = PaulusConfig(
        vocab_size=PV,
        emb_dim=4,
        hidden=6,
        enc_layers=1,
        dropout=0.0,
        init_range=0.5,
        feed_sample_prob=feed,
    )
    return build_model(config).double()


def _paulus_batch(B: int = 3, T: int = 6) -> Batch:
    g = torch.Generator().manual_seed(5)
    src = torch.randint(4, PV, (B, 1, 5), generator=g)
    tgt = torch.randint(4, PV, (B, T), generator=g)
    tgt[:, 0], tgt[:, -1] = 2, 3
    return Batch(
        src=src,
        src_mask=torch.ones_like(src, dtype=torch.bool),
        tgt=tgt,
        tgt_mask=torch.ones_like(tgt, dtype=torch.bool),
    )


def test_paulus_teacher_nll_and_gradient_are_padding_invariant() -> None:
    model = _paulus().eval()
    batch = _paulus_batch()
    params = [p for p in model.parameters() if p.requires_grad]
    plain = _forward(model, batch).total_nll()
    tgt = torch.cat([batch.tgt, torch.zeros(3, 2, dtype=torch.long)], 1)
    mask = torch.cat([batch.tgt_mask, torch.zeros(3, 2, dtype=torch.bool)], 1)
    padded = replace(batch, tgt=tgt, tgt_mask=mask)  # one summary cut short and two padding columns for everybody
    total = _forward(model, padded).total_nll()
    assert float(total.detach()) == pytest.approx(float(plain.detach()), rel=1e-12)
    assert torch.allclose(_grads(total, params), _grads(plain, params), atol=1e-12)
    short = replace(batch, tgt=batch.tgt.clone(), tgt_mask=batch.tgt_mask.clone())
    short.tgt[1, 3], short.tgt[1, 4:], short.tgt_mask[1, 4:] = 3, 0, False
    alone = short.rows(slice(1, 2))
    alone.tgt, alone.tgt_mask = alone.tgt[:, :4], alone.tgt_mask[:, :4]
    with torch.no_grad():
        rows = [_forward(model, batch.rows(slice(i, i + 1))).total_nll() for i in (0, 2)]
        rows.append(_forward(model, alone).total_nll())
        assert float(_forward(model, short).total_nll()) == pytest.approx(float(sum(rows)), rel=1e-12)


def test_paulus_feeds_a_sample_with_probability_p_in_training_only() -> None:
    p, rows = 0.25, 4000
    model = _paulus(feed=p)
    one = _paulus_batch(B=1, T=3)
    batch = replace(one, **{k: getattr(one, k).expand(rows, -1).clone() for k in ("tgt", "tgt_mask")})
    batch.src, batch.src_mask = (t.expand(rows, -1, -1).clone() for t in (one.src, one.src_mask))
    fed: list[torch.Tensor] = []
    hook = model.tgt_embedding.register_forward_hook(lambda m, args, out: fed.append(args[0].clone()))
    try:
        model.eval()
        with torch.no_grad():
            step0 = _forward(model, one).step_nll[0]  # −log p(y_1) of step 0, the same for every row
            fed.clear()
            eval_nll = _forward(model, batch).total_nll()
        assert all(torch.equal(f, batch.tgt[:, i]) for i, f in enumerate(fed))  # evaluation: the reference
        model.train()
        torch.manual_seed(2)
        with torch.no_grad():
            fed.clear()
            train_nll = _forward(model, batch).total_nll()
    finally:
        hook.remove()
    assert float(train_nll) != pytest.approx(float(eval_nll), rel=1e-9)  # (not vacuous: feeding changes it)
    # step 1 reads y_1 unless the coin fed a sample ≠ y_1: P(changed) = p (1 − p(y_1))
    changed = (fed[1] != batch.tgt[:, 1]).double().mean()
    q = p * (1.0 - math.exp(-float(step0[0])))
    assert abs(float(changed) - q) <= 5 * math.sqrt(q * (1 - q) / rows), (float(changed), q)
    assert torch.equal(fed[0], batch.tgt[:, 0])  # step 0 always reads <s>


# ----------------------------------------------------------------------------- MAL
def test_mal_saliency_loss_is_the_masked_mean_bce_and_padding_invariant() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    labels = (torch.rand(3, 5, generator=g) < 0.4).double()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    loss = saliency_loss(logits, labels, mask)
    r_hat = torch.sigmoid(logits.detach())
    for b in range(3):
        m = int(mask[b].sum())
        r, p = labels[b, :m], r_hat[b, :m]
        want = -(r * p.log() + (1 - r) * (1 - p).log()).sum() / m  # eq. (19): −(1/m_b) Σ_real ...
        assert float(loss[b].detach()) == pytest.approx(float(want), rel=1e-12)
    # padding invariance: other logits and labels at the padded positions change no value, no gradient
    junk_logits = torch.where(mask, logits.detach(), torch.full_like(logits, 4.0)).requires_grad_(True)
    junk_labels = torch.where(mask, labels, torch.ones_like(labels))
    wider = saliency_loss(
        torch.cat([junk_logits, torch.full((3, 2), -3.0, dtype=torch.float64)], 1),
        torch.cat([junk_labels, torch.ones(3, 2, dtype=torch.float64)], 1),
        torch.cat([mask, torch.zeros(3, 2, dtype=torch.bool)], 1),
    )
    assert torch.allclose(wider, loss, atol=1e-12)
    (ga,) = torch.autograd.grad(loss.sum(), logits)
    (gb,) = torch.autograd.grad(wider.sum(), junk_logits)
    assert torch.allclose(ga, gb, atol=1e-12) and float(gb[~mask].abs().max()) == 0.0


@torch.no_grad()
def test_mal_objective_is_batch_split_invariant() -> None:
    MV = 40
    torch.manual_seed(1)
    config = load_config("MAL+SUATT", [f"model.vocab_size={MV}", "model.emb_dim=8", "model.hidden=6"])
    model = build_model(config.model).double().eval()
    model.content[4::2] = True  # every other word is a content word (labels need them)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, MV, (4, 2, 5), generator=g)
    tgt = torch.cat([torch.full((4, 1), 2), src.flatten(1)[:, 1:5], torch.full((4, 1), 3)], 1)
    batch = Batch(
        src=src,
        src_mask=torch.ones_like(src, dtype=torch.bool),
        tgt=tgt,
        tgt_mask=torch.ones_like(tgt, dtype=torch.bool),
    )
    whole = mal_objective(model, batch, 4.0)
    assert whole.terms["loss_s"] > 0.01  # the saliency term is in play
    halves = [mal_objective(model, batch.rows(slice(i, i + 2)), 2.0) for i in (0, 2)]
    assert float(whole.loss) == pytest.approx(float((halves[0].loss + halves[1].loss) / 2), rel=1e-10)
    # and it is eq. (21): the mean over documents of L_s(b) + L_NLL(b)
    out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="soft")
    per_doc = out.loss_s + torch.stack(out.step_nll, 1).sum(1)
    assert float(whole.loss) == pytest.approx(float(per_doc.mean()), rel=1e-10)


# ----------------------------------------------------------------------------- the extended vocabulary
def test_extended_vocabulary_boundary_ids() -> None:
    Vt = 10
    tokens = torch.tensor([[Vt - 1, Vt, Vt + 1, 4]])
    assert to_input(tokens, Vt).tolist() == [[Vt - 1, 1, 1, 4]]  # slot 0 (id V_t) is fed as <unk>
    assert to_input(torch.tensor([Vt, Vt + 7]), Vt).tolist() == [1, 1]
    oov_rows = torch.tensor([[57, 83]])  # slot k -> corpus id
    assert to_corpus(tokens, oov_rows, Vt).tolist() == [[Vt - 1, 57, 83, 4]]


# ----------------------------------------------------------------------------- C2F: discounted reward-to-go
# (last in the file: the first C2F forward of a process pays the one-time import of its kernel path)
def test_c2f_surrogate_is_the_discounted_reward_to_go_formula() -> None:
    model = _c2f_model()
    batch = _c2f_batch()
    gamma, lam, b0, normalizer = 0.5, 0.7, 1.3, 4.0
    torch.manual_seed(1)
    result = c2f_objective(model, batch, normalizer, scg.baselines.EMA(0.1, init=b0), gamma, lam)
    out = result.output
    real = out.step_mask  # (B, T-1)
    costs = torch.stack([torch.where(real[:, t], c, torch.full_like(c, b0)) for t, c in enumerate(out.step_nll)], 1)
    coarse = sorted((n for n in result.graph.stochastic_nodes if n.name == COARSE), key=lambda n: n.step)
    assert [n.step for n in coarse] == list(range(costs.shape[1]))
    log_p = torch.stack([n.log_prob.reshape(n.log_prob.shape[0], -1).sum(1) for n in coarse], 1)  # (B, T-1)
    advantage = torch.zeros_like(costs)
    running = torch.zeros_like(costs[:, 0])
    for t in reversed(range(costs.shape[1])):  # A_t = (c_t − b_t) + γ A_{t+1}
        running = (costs[:, t].detach() - b0) + gamma * running
        advantage[:, t] = running
    assert float(advantage[1, 2:].abs().max()) == 0.0  # padding steps carry no credit
    by_hand = (costs.sum() + lam * (log_p * advantage).sum()) / normalizer
    params = [p for p in model.parameters() if p.requires_grad]
    got, want = _grads(result.loss, params), _grads(by_hand, params)
    assert float((got - want).abs().max()) <= 1e-9 * max(1.0, float(want.abs().max()))
    # not vacuous: the undiscounted reward-to-go and the unscaled score term give other gradients
    undiscounted = torch.flip(torch.cumsum(torch.flip(costs.detach() - b0, [1]), 1), [1])
    for other in (
        (costs.sum() + lam * (log_p * undiscounted).sum()) / normalizer,
        (costs.sum() + (log_p * advantage).sum()) / normalizer,
    ):
        assert float((_grads(other, params) - want).abs().max()) > 1e-4
