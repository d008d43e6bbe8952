"""``skip_scg_guards`` (``scg/credit/traced.py``, issue 25): a ``guard_filter_fn`` that drops
dynamo's guards on scg's own modules and keeps every guard on the program's values.

The filter is checked on guard entries named as dynamo names them (cheap), and, in a slow test,
through a real ``torch.compile`` of a declared step: the kept guards name no scg module, the step
computes the eager gradient, and a program value that changes (a tensor's shape) still makes
dynamo compile again.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._dynamo.types import GuardFilterEntry
from torch.distributions import Bernoulli

import scg
from scg import skip_scg_guards


def entry(name: str, is_global: bool = True) -> GuardFilterEntry:
    return GuardFilterEntry(
        name=name,
        has_value=False,
        value=None,
        guard_type="ID_MATCH",
        derived_guard_types=(),
        is_global=is_global,
        orig_guard=None,  # type: ignore[arg-type]  # (not read by the filter)
    )


def test_the_filter_drops_scg_modules_and_keeps_the_program() -> None:
    dropped = [
        "G['scg']",
        "G['scg'].sample.__code__",
        "G['scg'].cost.__kwdefaults__['step']",
        "G['__import_scg_dot_graph_dot_build']._open_graph.__code__",
        "dict(type(G['__import_scg_dot_estimators_dot_defaults']._SCORE_FUNCTION).__dict__)['score']",
    ]
    kept = [
        "theta",
        "L['structure'].per_example",  # the program's declaration
        "L['ema']._values",  # a baseline's state
        "G['scg_model']",  # a program global whose name starts like scg's
        "G['__import_scgx']",
        "G['__import_torch_dot_distributions_dot_bernoulli'].broadcast_all.__code__",
        "G['Bernoulli'].has_rsample",
        "",  # the global state guards have no name
    ]
    keep = skip_scg_guards([entry(n) for n in dropped + kept])
    assert keep == [False] * len(dropped) + [True] * len(kept)


def step(theta: torch.Tensor) -> torch.Tensor:
    with scg.Graph(structure=scg.Declared()) as g:
        b = scg.sample(Bernoulli(logits=theta), name="b")
        scg.cost((b - 0.5) * theta, name="c")
    return g.surrogate_loss()


@pytest.mark.slow
def test_a_compiled_step_without_scg_guards() -> None:
    """Kept guards name no scg module; the gradient is the eager one's; a new shape recompiles."""
    names: list[tuple[str, bool]] = []

    def record(entries: Any) -> list[bool]:
        keep = skip_scg_guards(entries)
        names.extend((e.name, k) for e, k in zip(entries, keep))
        return keep

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="eager", options={"guard_filter_fn": record})
    theta = torch.linspace(-1.0, 1.0, 4).requires_grad_()
    for seed in range(2):
        grads = []
        for fn in (step, compiled):
            torch.manual_seed(seed)
            grads.append(torch.autograd.grad(fn(theta), theta)[0])
        torch.testing.assert_close(grads[1], grads[0])
    assert any(not k for _, k in names)  # scg's guards were there, and dropped
    assert not [n for n, k in names if k and "scg" in n]
    assert "theta" in {n for n, k in names if k}  # (the step's argument: its tensor guard)
    before = len(names)
    compiled(torch.zeros(6, requires_grad=True))  # another shape: the kept tensor guard fails
    assert len(names) > before
