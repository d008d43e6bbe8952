"""C2F: the per-step attention reads only the selected chunks; the scg graph and its gradients."""

from __future__ import annotations

import torch
from scg_summarize.models import c2f_read, c2f_step, flat_step
from scg_summarize.train.objective import c2f_objective, mle_objective

import scg

from ..models_helpers import make_batch, make_model


def _select(idx: torch.Tensor):
    def select(logits: torch.Tensor):
        return idx, torch.full(idx.shape, 1.0 / idx.shape[1])

    return select


def test_c2f_step_touches_only_the_selected_chunks() -> None:
    torch.manual_seed(0)
    B, M, N, H, k = 2, 6, 5, 4, 2
    words = torch.randn(B, M, N, H)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    idx = torch.tensor([[1, 4], [3, 3]])
    selected = torch.zeros(B, M, dtype=torch.bool)
    selected[torch.arange(B).unsqueeze(1), idx] = True
    poisoned = words.masked_fill(~selected.view(B, M, 1, 1), float("nan"))  # unselected chunks are NaN
    poisoned.requires_grad_(True)
    chunks = torch.randn(B, M, 3)
    out = c2f_step(chunks, mask.any(-1), poisoned, mask, torch.randn(B, 3), torch.randn(B, H), _select(idx))
    assert torch.isfinite(out.context).all()  # no NaN read
    assert out.alpha_w.shape == (B, k, N)
    out.context.sum().backward()
    grad = poisoned.grad
    assert torch.all(grad[~selected] == 0)  # no gradient flows to unread chunks
    assert torch.all(grad[selected].abs().sum(-1) > 0)
    # the flat (STANDARD) step does read everything
    context, _ = flat_step(poisoned.detach(), mask, torch.randn(B, H))
    assert torch.isnan(context).all()


def test_c2f_read_gathers_k_chunks_not_m() -> None:
    """The tensors built inside a step are O(k N H): count the elements of every op's output."""
    from torch.overrides import TorchFunctionMode

    class Largest(TorchFunctionMode):
        biggest = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and func is not torch.Tensor.expand:
                Largest.biggest = max(Largest.biggest, out.numel())
            return out

    B, M, N, H, k = 2, 50, 8, 4, 2
    words = torch.randn(B, M, N, H)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    with Largest():
        c2f_read(words, mask, torch.tensor([[0, 7], [3, 3]]), torch.full((B, k), 0.5), torch.randn(B, H))
    assert Largest.biggest == B * k * N * H  # the gathered (B, k, N, H) block; never (B, M, N, H)


def test_c2f_step_equals_hier_when_given_the_chunk_probabilities() -> None:
    """With all M chunks 'selected' and weights α^s, the hard step computes the HIER context."""
    from scg_summarize.models import hier_step

    torch.manual_seed(1)
    B, M, N, H = 2, 3, 4, 5
    words, mask = torch.randn(B, M, N, H), torch.ones(B, M, N, dtype=torch.bool)
    probs = torch.softmax(torch.randn(B, M), 1)
    q = torch.randn(B, H)
    context, _ = c2f_read(words, mask, torch.arange(M).expand(B, M), probs, q)
    expected, _ = hier_step(words, mask, probs, q)
    torch.testing.assert_close(context, expected)


def test_c2f_batch_graph_has_one_coarse_node_per_step_and_trains_the_chunk_scorer() -> None:
    batch = make_batch(B=3, T=6)
    model = make_model("c2f", multi=2)
    ema = scg.baselines.EMA(0.1)
    result = c2f_objective(model, batch, 3.0, ema, discount=0.5, reward_scale=0.3)
    g = result.graph
    steps = batch.tgt.shape[1] - 1
    coarse = [n for n in g.stochastic_nodes if n.name == "coarse"]
    assert [n.step for n in coarse] == list(range(steps))
    assert [c.step for c in g.cost_nodes] == list(range(steps))
    # a draw influences its own step's cost and every later one, never an earlier one (the objective
    # declares it; test_c2f_structure.py checks the declaration against tracking)
    for t in range(steps):
        for s in range(steps):
            assert g.influences(coarse[t], g.cost_nodes[s]) == (s >= t)
    result.loss.backward()
    scorer = model.decoder.attention.w_chunk.weight.grad
    conv = model.chunk_encoder.conv.weight.grad
    assert scorer is not None and scorer.abs().sum() > 0
    assert conv is not None and conv.abs().sum() > 0
    assert ema.value("nll", 0) != 0.0  # the per-step baseline was updated


def test_chunk_scorer_gradient_is_the_score_function_term() -> None:
    """Without the REINFORCE term (λ = 0) the coarse scorer gets no gradient at all: hard
    attention is not differentiable, scg's score-function term is what trains it."""
    batch = make_batch(B=3, T=6)
    model = make_model("c2f")
    c2f_objective(model, batch, 3.0, scg.baselines.EMA(0.1), discount=0.5, reward_scale=0.0).loss.backward()
    grad = model.decoder.attention.w_chunk.weight.grad
    assert grad is None or torch.all(grad == 0)


def test_finished_examples_give_zero_advantage() -> None:
    """Past an example's end its cost equals the running baseline, so c_t − b_t = 0 there."""
    batch = make_batch(B=3, T=6)
    model = make_model("c2f")
    ema = scg.baselines.EMA(0.5)
    c2f_objective(model, batch, 3.0, ema, 0.5, 0.3)  # move the baseline away from 0
    before = [ema.value("nll", t) for t in range(5)]
    result = c2f_objective(model, batch, 3.0, ema, 0.5, 0.3)
    mask = result.output.step_mask
    for t, c in enumerate(result.graph.cost_nodes):
        assert torch.all(c.value[~mask[:, t]] == before[t])
    real = torch.stack(result.output.step_nll, 1)[mask].sum().detach()
    assert abs(result.nll - float(real)) < 1e-4


def test_soft_models_train_by_plain_nll_without_a_graph() -> None:
    batch = make_batch()
    for attention in ("standard", "model1", "hier"):
        model = make_model(attention, dropout=0.0)
        result = mle_objective(model, batch, 2.0)
        assert result.graph is None and result.soft
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)
        torch.testing.assert_close(result.loss, out.total_nll() / 2.0)
        result.loss.backward()
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_surrogate_value_is_the_nll_plus_padding_fills() -> None:
    batch = make_batch(B=3, T=6)
    model = make_model("c2f", multi=2)
    result = c2f_objective(model, batch, 1.0, scg.baselines.EMA(0.1), 0.5, 0.3)
    # first call: the baseline is 0, so the fills are 0 and the surrogate evaluates to Σ NLL
    assert abs(float(result.loss.detach()) - result.nll) < 1e-3
