"""A learned baseline b_v = f_φ(x), trained by regression to the downstream cost.

The module's inputs x must be available before the node is sampled (Theorem 2 of Schulman et al.
2015): scg checks that they are not influenced by the node. The regression loss
``mean((f_φ(x) − Ĉ_v)²)`` is added to the surrogate with zero forward value, so one ``backward()``
trains the model and the baseline together (its parameters must be in an optimizer).

The inputs are **detached** before the module sees them: the regression trains φ only. A feature
x = h(θ) of the model (a hidden state) may be passed as it is; without the detach the regression
loss would backpropagate into θ and add ∇_θ mean((f_φ(h(θ)) − Ĉ_v)²) to the model's gradient, a
bias (the baseline's fit is not part of E[Σ costs]). To train a shared encoder from the baseline's
loss on purpose, add that loss yourself.

The module's own parameters are φ, whatever else uses them: a module that contains part of the model
(an actor-critic's shared encoder inside ``Sequential(encoder, head)``) trains that part by the
regression too, and the model's gradient is then ∇E[Σ costs] plus the regression loss's gradient
(not detected). Keep the shared part out of the module and pass its output, ``.given(encoder(x))``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F

from scg.baselines.base import Baseline, BaselineResult
from scg.errors import SCGError

if TYPE_CHECKING:
    from scg.graph.nodes import Node, SampleInfo

__all__ = ["Learned"]


def _snapshot(x: Any) -> Any:
    """``x`` with its lists, tuples and dicts copied (the tensors in them shared): the module reads
    the inputs as they were when the baseline was bound, before the draw. It reads them when the
    surrogate is built, and a list the program appends to after the draw (an RNN's ``hs``, read as
    ``hs[-1]``) would hand it the node's own sample (a biased baseline, not seen: the checks see the
    tensors recorded at the draw). Writes into the tensors themselves are caught by their versions."""
    if isinstance(x, list):
        return [_snapshot(v) for v in x]
    if isinstance(x, tuple):
        items = [_snapshot(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)  # (a namedtuple keeps its type)
    if isinstance(x, dict):
        return {k: _snapshot(v) for k, v in x.items()}
    return x


class Learned(Baseline):
    """b_v = ``module(*inputs)``, with inputs bound per node by [`given`][scg.baselines.Learned.given].

    Args:
        module: maps the inputs to a tensor broadcastable to the node's log-probability shape.
        loss_weight: weight of the regression loss in the surrogate (it trains the module's
            parameters only: the inputs are detached, see the module docstring).

    A learning signal with no elements (a batch of 0 examples) fits nothing: its regression loss
    is 0.

    Example::

        bl = scg.baselines.Learned(torch.nn.Linear(H, 1))
        z = scg.sample(Categorical(logits=s), baseline=bl.given(h))   # b = bl(h).squeeze(-1)
    """

    def __init__(self, module: torch.nn.Module, *, loss_weight: float = 1.0) -> None:
        if not callable(module):
            raise SCGError(f"Learned(module): module must be callable, got {type(module).__name__}")
        if (
            isinstance(loss_weight, bool)
            or not isinstance(loss_weight, (int, float))
            or not (math.isfinite(float(loss_weight)) and float(loss_weight) > 0)
        ):
            raise SCGError(f"Learned(loss_weight=...): expected a finite number > 0, got {loss_weight!r}")
        self.module: torch.nn.Module = module
        self.loss_weight: float = float(loss_weight)
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.source: Learned = self  # the baseline ``given`` copied (its bound copies share it)

    def given(self, *inputs: torch.Tensor) -> Learned:
        """A copy of this baseline bound to ``inputs`` (sharing the module)."""
        bound = Learned.__new__(Learned)
        bound.module = self.module
        bound.loss_weight = self.loss_weight
        bound.inputs = tuple(_snapshot(x) for x in inputs)  # (containers as they are now: see _snapshot)
        bound.source = self.source
        return bound

    def batch_key(self) -> object:
        return self.source

    def __call__(self, nodes: Sequence[Node], targets: torch.Tensor, info: Sequence[SampleInfo]) -> BaselineResult:
        copies = [getattr(n, "baseline", None) for n in nodes]
        if all(c is self for c in copies) or not all(isinstance(c, Learned) for c in copies):
            # the nodes of this copy (or of a baseline wrapping it): one prediction serves them
            # all, broadcast against their stacked targets, as is the value. The loss is
            # mean((pred − targets)²) as one operation (the same value; the same gradient bit
            # for bit at loss_weight 1: (pred − t)·(2/n) is (1/n)·2(pred − t))
            pred = self._predict(self.inputs, nodes[0], targets.shape[1:])
            # (targets are detached; one row: its view, not an expansion of the prediction)
            rows = targets.shape[0]  # (not len(targets): Tensor.__len__ is Python, with checks)
            loss = F.mse_loss(pred, targets[0]) if rows == 1 else F.mse_loss(pred.expand_as(targets), targets)
            value = pred
        else:  # bound copies of one module (e.g. one per step): one prediction per copy, stacked
            first: dict[int, int] = {}  # id(copy) -> its first row
            for i, c in enumerate(copies):
                first.setdefault(id(c), i)
            preds = {
                key: self._predict(cast(Learned, copies[i]).inputs, nodes[i], targets.shape[1:])
                for key, i in first.items()
            }
            value = torch.stack([preds[id(c)] for c in copies])
            sq = (value - targets) ** 2
            row_loss = sq.mean(dim=tuple(range(1, sq.dim()))) if sq.dim() > 1 else sq
            if len(first) < len(copies):  # each copy's loss is the mean over its rows, as if called alone
                count = Counter(id(c) for c in copies)
                row_loss = row_loss / row_loss.new_tensor([count[id(c)] for c in copies])
            loss = row_loss.sum()
        if targets.numel() == 0:  # a batch of no elements (a last batch of 0 examples) fits nothing: its
            # mean squared error over none is NaN, the surrogate's value with it (the sum over none: 0, of φ)
            loss = value.sum()
        elif self.loss_weight != 1.0:
            loss = self.loss_weight * loss
        return BaselineResult(value.detach(), loss)

    def _predict(self, inputs: tuple[torch.Tensor, ...], node: Node, shape: torch.Size) -> torch.Tensor:
        """``module(*inputs)`` of the node's shape; the inputs detached (the regression must train
        φ only, never the model that computed the inputs)."""
        # (an input that needs no grad, often the data, is passed as it is)
        try:
            pred = self.module(*(x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x for x in inputs))
        except (TypeError, RuntimeError) as e:  # (no .given(h): no inputs; inputs of the wrong shape)
            hint = " (its inputs are bound with .given(h): none were)" if not inputs else ""
            shapes = ", ".join(str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs)
            raise SCGError(
                f"Learned baseline of {node.describe()}: calling its module {type(self.module).__name__} with "
                f"{len(inputs)} input(s) failed{hint}{f' (shapes {shapes})' if inputs else ''}: {e}"
            ) from None
        if not isinstance(pred, torch.Tensor):
            raise SCGError(
                f"Learned baseline of {node.describe()}: module returned {type(pred).__name__}, expected a tensor"
            )
        if pred.dim() > len(shape) and pred.shape[-1] == 1:
            pred = pred.squeeze(-1)
        if pred.shape != shape:
            try:
                pred = pred.expand(shape)
            except RuntimeError:
                raise SCGError(
                    f"Learned baseline of {node.describe()}: prediction of shape "
                    f"{tuple(pred.shape)} does not broadcast to the target shape {tuple(shape)}"
                ) from None
        return pred

    def state_dict(self) -> dict[str, Any]:
        return {"module": self.module.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state["module"])

    def __repr__(self) -> str:
        return f"Learned({type(self.module).__name__})"
