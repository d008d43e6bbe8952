"""The C2F training objective (sampled forward, one cost per step with the EMA baseline, scg's
declared surrogate) is captured whole by ``torch.compile(fullgraph=True)`` and computes what the
eager objective does: the loss, every gradient and the EMA's state, bit for bit with dynamo's
eager backend and the same draws.

Two things stood in the way: dynamo refuses ``nn.LSTM`` unless ``torch._dynamo.config.allow_rnn``
(experimental in torch 2.13, patched here for the test only), and the word encoder read its
longest chunk to the host to skip the all-padding tail (a data-dependent integer dynamo cannot
trace, and a host read a CUDA graph capture cannot make); inside a compilation or a capture the
encoder runs over the whole width instead (the states are the same).
"""

from __future__ import annotations

import torch
from scg_summarize.kernels.backend import forced
from scg_summarize.train.objective import c2f_objective

import scg

from ..models_helpers import make_batch, make_model


def test_the_c2f_objective_compiles_whole_and_equals_the_eager_one() -> None:
    model = make_model("c2f", multi=2)
    batch = make_batch(B=3, T=6)
    params = [p for p in model.parameters() if p.requires_grad]
    emas = {"eager": scg.baselines.EMA(0.1), "compiled": scg.baselines.EMA(0.1)}
    structures = {"eager": scg.Declared(), "compiled": scg.Declared()}

    def objective(which: str) -> torch.Tensor:
        result = c2f_objective(model, batch, 3.0, emas[which], 0.5, 0.3, structures[which], False)
        return result.loss

    def run(fn: object, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        torch.manual_seed(seed)
        loss = fn()  # type: ignore[operator]
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return loss.detach(), [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]

    torch._dynamo.reset()
    with forced("reference"), torch._dynamo.config.patch(allow_rnn=True):
        compiled = torch.compile(lambda: objective("compiled"), fullgraph=True, backend="eager")
        for seed in range(3):  # (the EMA's averages move from step to step: its state is compared too)
            loss, grads = run(lambda: objective("eager"), seed)
            c_loss, c_grads = run(compiled, seed)
            assert torch.equal(loss, c_loss)
            assert all(torch.equal(a, b) for a, b in zip(grads, c_grads))
            assert any(bool(g.abs().sum() > 0) for g in grads)
            steps = batch.tgt.shape[1] - 1
            for t in range(steps):
                assert torch.equal(emas["eager"].value("nll", t), emas["compiled"].value("nll", t))
    torch._dynamo.reset()
