"""Learned control variates: the machinery RELAX, REBAR and LAX share.

Each of these estimators keeps the score term of Algorithm 1 and subtracts a control variate
c_φ evaluated at a *relaxation* of the sample: z, reparameterized unconditionally, and z̃, drawn
given the sample b (for a discrete node; for a continuous node z̃ = b itself). In the surrogate
the node contributes (ω the node's sample weights, 1 without sample dimensions)

    (log p − ⊥log p) · ω (⊥Ĉ_v − b_v − c_φ(z̃))  +  ω [c_φ(z) − c_φ(⊥z)] − ω [c_φ(z̃) − c_φ(⊥z̃)],

whose value is 0 and whose gradient in θ is

    ĝ = [f(b) − c_φ(z̃)] ∇_θ log p(b | θ) + ∇_θ c_φ(z) − ∇_θ c_φ(z̃),

unbiased for ∇_θ E[f(b)] for any c_φ (Grathwohl, Choi, Wu, Roeder & Duvenaud 2018) of the node's
element: with several elements (a batch), element e's control must read element e of the
relaxation only, since it is subtracted against that element's score (`LearnedControl._check_local`
refuses one that does not, once per estimator). The last
bracket is absent when z̃ does not depend on θ (LAX: z̃ = b). Its gradient in φ is zero too, so
``surrogate.backward()`` does not train φ. Since E[ĝ] does not depend on φ,
∇_φ Var(ĝ) = ∇_φ E[‖ĝ‖²], and ĝ keeps its dependence on φ when computed with
``create_graph=True`` (c_φ(z̃) enters the score term undetached): `LearnedControl.backward`
takes both steps. Subclasses implement ``draw`` and `LearnedControl.relaxations`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

import torch

from scg.errors import SCGError
from scg.estimators.base import Estimator

if TYPE_CHECKING:
    from scg.baselines.base import Baseline
    from scg.graph.nodes import StochasticNode

__all__ = ["LearnedControl"]


class LearnedControl(Estimator):
    """Base class of the score function with a learned control variate c_φ (see the module).

    Args:
        control: c_φ, maps a relaxation ``z`` (as the subclass defines it) to a tensor of the
            node's log-probability shape ``(*sample, *batch)``; usually a ``torch.nn.Module``.
        parameters: φ, the tensors `backward` trains to reduce the variance; default: the
            module's ``parameters()``.
        baseline: an ordinary baseline subtracted as well (optional).
    """

    score: ClassVar[bool] = True
    rereads_value: ClassVar[bool] = True  # (the relaxations, given the drawn sample)

    #: controls computed so far, and the count at which the next locality check runs
    #: (`_check_local`: at the 1st, 2nd, 4th, 8th, ... control of more than one element)
    _controls: int = 0
    _next_check: int = 1
    #: whether `backward` looked for trainable tensors outside its params and φ (once per estimator)
    _reach_checked: bool = False

    def __init__(
        self,
        control: Callable[[torch.Tensor], torch.Tensor],
        *,
        parameters: Iterable[torch.Tensor] | None = None,
        baseline: Baseline | None = None,
    ) -> None:
        if not callable(control):
            raise SCGError(
                f"{type(self).__name__}(control): expected a callable (e.g. a torch.nn.Module), "
                f"got {type(control).__name__}"
            )
        self.control = control
        if parameters is None:  # (a module's frozen parameters are not φ)
            given: list[torch.Tensor] = (
                [p for p in control.parameters() if p.requires_grad] if isinstance(control, torch.nn.Module) else []
            )
        else:
            given = _tensors(parameters, f"{type(self).__name__}(parameters=...)")
            frozen = [tuple(p.shape) for p in given if not p.requires_grad]
            if frozen:
                raise SCGError(
                    f"{type(self).__name__}(parameters=...): {len(frozen)} of them do not require grad (shapes "
                    f"{frozen[:3]}), so backward would never train them; call requires_grad_() on them"
                )
        self.parameters = given
        self.baseline = baseline

    def relaxations(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        """(z, z̃) for the node's sample: z reparameterized unconditionally, z̃ given the sample."""
        raise NotImplementedError

    def evaluate(self, z: torch.Tensor, node: StochasticNode) -> torch.Tensor:
        """c_φ(z) for ``node`` (``self.control(z)``; REBAR relaxes the cost here)."""
        del node
        return self.control(z)

    def _c(self, z: torch.Tensor, node: StochasticNode) -> torch.Tensor:
        out = self.evaluate(z, node)
        assert node.log_prob is not None
        want = node.log_prob.shape
        if not isinstance(out, torch.Tensor) or out.shape != want:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise SCGError(
                f"{type(self).__name__} control of {node.describe()}: returned {got}, expected "
                f"the node's log-probability shape {tuple(want)}"
            )
        return out

    def control_variate(self, node: StochasticNode) -> tuple[torch.Tensor, torch.Tensor]:
        z, zt = self.relaxations(node)
        c_zt = self._c(zt, node)
        if c_zt.numel() > 1:  # (one element: nothing else to read)
            self._controls += 1
            if self._controls >= self._next_check:
                self._next_check = 2 * self._controls
                self._check_local(zt.detach(), c_zt.detach(), node)
        path = self._c(z, node) - self._c(z.detach(), node)
        if zt.requires_grad:
            path = path - (c_zt - self._c(zt.detach(), node))
        return c_zt, path

    def _check_local(self, zt: torch.Tensor, c_zt: torch.Tensor, node: StochasticNode) -> None:
        """Refuse a control whose element e reads other elements of the relaxation: each element's
        control is subtracted against that element's score only, which is unbiased only for a
        control of its own element. (A control of a whole example: draw the node as
        ``Independent(...)``, one element per example.)

        Complete for the control as it is now: for each bit b of the elements' flat index, the
        relaxation of the elements whose bit b is 1 is moved (then of those whose bit is 0; each
        entry by its own amount, so a softmax over an element's entries does not hide it), and
        the control of every element not moved must not change; any two elements differ in a bit,
        so every element is moved once without every other one (2·⌈log₂ E⌉ evaluations). φ is
        trained, and a control may start out local (a last layer initialised to zero), so the
        check runs again at the 2nd, 4th, 8th, ... control (`control_variate`)."""
        count = c_zt.numel()
        index = torch.arange(count, device=zt.device).reshape(c_zt.shape)
        scale = 1e-6 * (1.0 + c_zt.abs())
        # each entry of the relaxation moves by its own amount in [0.5, 1.5): a move of all of an
        # element's entries by one amount is invisible through a softmax over them (a Categorical's
        # (..., K) relaxation), and a move by exactly 1 to a function of period 1 (a generator of
        # this check's own: the same amounts every time, no global state)
        draws = torch.Generator(device="cpu").manual_seed(self._controls)
        amounts = (0.5 + torch.rand(zt.shape, generator=draws, dtype=torch.float64)).to(zt.device, zt.dtype)
        with torch.no_grad():
            for bit in range(max(1, (count - 1).bit_length())):
                for value in (0, 1):
                    # (*c_zt.shape) bool; neither empty nor full: 0 has every bit clear, and
                    # 2**bit < count has bit b set
                    moved_elements = (index >> bit & 1) == value
                    step = moved_elements.reshape(*c_zt.shape, *([1] * (zt.dim() - c_zt.dim())))
                    change = (self.evaluate(zt + step.to(zt.dtype) * amounts, node) - c_zt).abs()
                    read = (change > scale) & ~moved_elements
                    if bool(read.any()):
                        e = int(index[read][0])
                        source = self._source(zt, c_zt, node, e, index[moved_elements].tolist()[:64])
                        raise SCGError(
                            f"{type(self).__name__} control of {node.describe()}: the control of element "
                            f"{_index(e, c_zt.shape)} changes when {source} of the relaxation moves; "
                            "each element's control is subtracted against that element's score alone, "
                            "which is unbiased only when it reads its own element. Make the control "
                            "elementwise, or draw the node as "
                            "Independent(...) so that one element is a whole example (e.g. "
                            "Independent(Bernoulli(logits), 1) for a bit vector)"
                        )

    def _source(self, zt: torch.Tensor, c_zt: torch.Tensor, node: StochasticNode, e: int, moved: list[int]) -> str:
        """Which of the ``moved`` elements (flat indices) element ``e``'s control reads, for the
        message (one evaluation each, on the refusal's path only)."""
        flat = zt.reshape(c_zt.numel(), -1)
        amounts = torch.linspace(0.5, 1.5, flat.shape[1], dtype=zt.dtype, device=zt.device)
        for other in moved:
            step = torch.zeros_like(flat)
            step[other] = amounts
            change = (self.evaluate(zt + step.reshape(zt.shape), node) - c_zt).reshape(-1)[e].abs()
            if bool(change > 1e-6 * (1.0 + c_zt.reshape(-1)[e].abs())):
                return f"element {_index(other, c_zt.shape)}"
        return "another element"

    @staticmethod
    def variance_loss(grads: Sequence[torch.Tensor | None]) -> torch.Tensor:
        """‖ĝ‖² = Σ ĝ²: its φ-gradient is ∇_φ Var(ĝ) when ĝ was built with ``create_graph``."""
        terms = [(g**2).sum() for g in grads if g is not None]
        if not terms:
            raise SCGError("variance_loss: no gradients")
        return torch.stack(terms).sum()

    def backward(self, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """Accumulate ĝ into ``params``' ``.grad`` and ∇_φ ‖ĝ‖² into φ's; return ‖ĝ‖².

        ``params`` are the model parameters θ (not φ). One call replaces ``loss.backward()``.
        """
        if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
            got = type(loss).__name__ if not isinstance(loss, torch.Tensor) else "a tensor without a gradient"
            raise SCGError(f"{type(self).__name__}.backward(loss, params): expected the surrogate loss, got {got}")
        params = _tensors(params, f"{type(self).__name__}.backward(loss, params)")
        if not self._reach_checked:
            self._warn_unlisted(loss, params)
        grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
        var = self.variance_loss(grads)
        if self.parameters and var.requires_grad:
            gphi = torch.autograd.grad(var, self.parameters, allow_unused=True, retain_graph=True)
            _accumulate(self.parameters, gphi)
        _accumulate(params, grads)
        return var.detach()

    def _warn_unlisted(self, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> None:
        """Warn (once per estimator) when ``loss`` reaches trainable leaves that are neither
        ``params`` nor φ: `backward` computes no gradient for them, where ``loss.backward()``
        would have (a `Learned` baseline's module, trained by its regression term in the
        surrogate, would silently stop learning)."""
        self._reach_checked = True
        listed = {id(p) for p in params} | {id(p) for p in self.parameters}
        missed: list[torch.Tensor] = []
        seen: set[int] = set()
        stack = [loss.grad_fn] if loss.grad_fn is not None else []
        while stack:
            fn = stack.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            leaf = getattr(fn, "variable", None)  # (an AccumulateGrad: a leaf that requires grad)
            if isinstance(leaf, torch.Tensor) and id(leaf) not in listed:
                missed.append(leaf)
            stack.extend(f for f, _ in fn.next_functions if f is not None)
        if missed:
            shapes = ", ".join(str(tuple(p.shape)) for p in missed[:5]) + (", ..." if len(missed) > 5 else "")
            warnings.warn(
                f"{type(self).__name__}.backward(loss, params): the loss reaches {len(missed)} tensor(s) that "
                f"require grad but are neither in params nor the control's parameters (shapes {shapes}), and "
                "this call computes no gradient for them (loss.backward() would have): for example a Learned "
                "baseline's module, trained by its regression term in the loss. Add them to params to train "
                "them (their squared gradient then enters ‖ĝ‖² as a term without φ, so φ's gradient is unchanged)",
                UserWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(control={self.control!r})"


def _tensors(values: object, what: str) -> list[torch.Tensor]:
    """``values`` as a list of tensors (a list, a tuple, ``module.parameters()``); a single
    tensor, whose rows iterating it would give, or anything else is refused naming ``what``."""
    if isinstance(values, torch.Tensor) or isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise SCGError(f"{what}: expected a list of tensors (e.g. [w] or module.parameters()), got {values!r}")
    out = list(values)
    for v in out:
        if not isinstance(v, torch.Tensor):
            raise SCGError(f"{what}: expected a list of tensors, got an element {type(v).__name__}")
    return out


def _accumulate(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None]) -> None:
    for p, g in zip(params, grads, strict=True):
        if g is None:
            continue
        g = g.detach()
        p.grad = g.clone() if p.grad is None else p.grad + g


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    """The index of entry ``flat`` of a tensor of ``shape``."""
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))
