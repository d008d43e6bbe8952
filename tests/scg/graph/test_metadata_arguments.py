"""Arguments an operation reads only the metadata of (``scg.graph.ops``: ``x.new_full(size, v)``
reads ``x``'s dtype and device; ``x.to(y)``, ``x.type_as(y)``, ``x.view_as(y)``,
``x.reshape_as(y)``, ``x.expand_as(y)`` read ``y``'s dtype, device or shape) give the output none
of their influence.

They used to: a constant cast to a batched cost's dtype, ``b.to(nll)``, took the influence of every
example at once, so a per-example cost ``torch.where(real, nll, b.to(nll))`` credited each
example's draw with the whole batch's cost (whole-plate credit: unbiased, but the variance of
crediting every example with every other's cost), with nothing said.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.distributions import Categorical

import scg

B = 4
THETA = torch.zeros(B, 3, dtype=torch.float64, requires_grad=True)

#: a constant made with a batched tensor ``like`` (float64, (B,)) as a metadata argument
CONSTANTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "to(other)": lambda like: torch.tensor(0.5).to(like),  # float32 -> float64: a new tensor
    "type_as": lambda like: torch.tensor(0.5).type_as(like),
    "view_as": lambda like: torch.full((B, 1), 0.5, dtype=torch.float64).view_as(like),
    "reshape_as": lambda like: torch.full((1, B), 0.5, dtype=torch.float64).reshape_as(like),
    "expand_as": lambda like: torch.tensor(0.5, dtype=torch.float64).expand_as(like),
    "new_full": lambda like: like.new_full((), 0.5),
    "new_zeros": lambda like: like.new_zeros(()),
    "new_ones": lambda like: like.new_ones(()),
    "new_empty": lambda like: like.new_empty(()).fill_(0.5),
}


@pytest.mark.parametrize("how", sorted(CONSTANTS))
def test_a_constant_made_with_a_metadata_argument_keeps_per_example_credit(how: str) -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=THETA), name="z")  # (B,)
        nll = z.double() + THETA.sum(-1)  # per example
        fill = CONSTANTS[how](nll)
        scg.cost(torch.where(z > 0, nll, fill), name="c")
    g.surrogate_loss()
    assert g.influences("z", "c")
    assert g.credit("z", "c") == "per-element", how


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # (torch's advice on new_tensor)
@pytest.mark.parametrize(
    "flow",
    [
        lambda x, like: x.to(like),  # the data of x (cast)
        lambda x, like: x.view_as(like),
        lambda x, like: x.expand_as(like),
        lambda x, like: like.new_tensor(x),  # new_tensor copies its data argument
    ],
)
def test_the_argument_whose_values_are_read_still_carries_its_influence(
    flow: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Only the metadata arguments are skipped: the data argument's influence reaches the cost,
    per element."""
    like = torch.zeros(B, dtype=torch.float64)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=THETA), name="z")
        scg.cost(flow(z.float(), like) + THETA.sum(-1), name="c")
    g.surrogate_loss()
    assert g.credit("z", "c") == "per-element"


def test_a_cost_computed_only_from_a_metadata_argument_is_not_influenced() -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=THETA), name="z")
        scg.cost(z.double(), name="c0")  # (the node's own cost, so the graph has a path)
        scg.cost(torch.zeros(B, dtype=torch.float32).to(z.double()) + THETA.sum(-1), name="c1")
    g.surrogate_loss()
    assert g.influences("z", "c0") and not g.influences("z", "c1")
