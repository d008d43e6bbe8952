"""A graph's annotations: ``scg.deterministic`` (a named intermediate value, for inspection and
drawing) and ``scg.influenced_by`` (a dependency scg cannot see)."""

from __future__ import annotations

import torch

from scg.errors import SCGError
from scg.graph.build import open_graph
from scg.graph.graph import GraphRecord
from scg.graph.influence import fresh_alias, sum_masks
from scg.graph.nodes import DeterministicNode, Location, Node

__all__ = ["deterministic", "influenced_by"]


def deterministic(value: torch.Tensor, *, name: str, step: int | None = None) -> torch.Tensor:
    """Record a named deterministic node (a square in the paper's drawings) and return its value.

    Only for inspection and drawing: influence flows through it unchanged.
    """
    g, location = open_graph("deterministic", name)
    if not isinstance(value, torch.Tensor):
        raise SCGError(f"scg.deterministic(name={name!r}) at {location}: expected a tensor, got {type(value).__name__}")
    if not g.tracked:
        g.record(_deterministic_node(g, name, step, value, 0, location, {}))
        return value
    foreign = g.foreign(value)
    alias, parents = fresh_alias(g, value)
    node = g.record(_deterministic_node(g, name, step, alias, parents, location, foreign))
    g.set_mask(alias, 1 << node.index)
    return alias


def _deterministic_node(
    g: GraphRecord,
    name: str,
    step: int | None,
    value: torch.Tensor,
    parents: int,
    location: Location | str,
    foreign: dict[int, int],
) -> DeterministicNode:
    return DeterministicNode(
        index=len(g.nodes),
        name=g.node_name(name, "deterministic", step, location),
        value=value,
        parents=parents,
        step=step,
        location=location,
        foreign=foreign,
        graph=g.id,
    )


def influenced_by(value: torch.Tensor, *sources: torch.Tensor | Node, per_element: bool = False) -> torch.Tensor:
    """Declare that ``value`` depends on ``sources`` through a path scg cannot see.

    Use it where a sample left tensor land (``.item()``, Python ``if``) and came back::

        if bool(z == 0):                         # InfluenceLostWarning points here
            c = loss_a(x)
        else:
            c = loss_b(x)
        scg.cost(scg.influenced_by(c, z))        # c depends on z through the branch

    Returns a new tensor sharing ``value``'s data whose influence includes the sources'. scg
    cannot know which elements of the sources each element of ``value`` depends on, so the
    sources get whole-plate credit from it (`scg.credit.plates`), unless ``per_element=True``
    declares that ``value[i, ...]`` depends on element ``i`` of each source only (their leading
    dimensions line up).

    In a graph that is not tracked (``scg.Graph(structure=scg.Declared(...))``) the declared
    structure is the whole relation: ``value`` is returned unchanged.
    """
    g, location = open_graph("influenced_by", None)
    if not isinstance(value, torch.Tensor):
        raise SCGError(f"scg.influenced_by at {location}: value must be a tensor, got {type(value).__name__}")
    if not sources:
        raise SCGError(f"scg.influenced_by at {location}: no sources; pass the samples (or nodes) value depends on")
    if type(per_element) is not bool:
        raise SCGError(f"scg.influenced_by(per_element=...) at {location}: expected True or False, got {per_element!r}")
    if not g.tracked:
        return value
    extra = 0
    for i, s in enumerate(sources):
        if not isinstance(s, (torch.Tensor, Node)):
            raise SCGError(
                f"scg.influenced_by at {location}: source {i} is a {type(s).__name__}; pass the "
                "tensor it was computed from (e.g. the sample), not a Python value"
            )
        if per_element and isinstance(s, torch.Tensor) and s.dim() and value.dim() and s.shape[0] != value.shape[0]:
            raise SCGError(
                f"scg.influenced_by(per_element=True) at {location}: source {i} has {s.shape[0]} rows and the "
                f"value {value.shape[0]}; per-element influence needs their leading dimensions to line up"
            )
        m = sum_masks(g, s)
        if m == 0:
            raise SCGError(
                f"scg.influenced_by at {location}: source {i} was not computed from any node of the open graph"
            )
        extra |= m
    foreign = g.foreign(value)
    if not per_element:  # a declared dependency: no per-element claim
        foreign[0] = foreign.get(0, 0) | extra
    alias, parents = fresh_alias(g, value)
    g.set_mask(alias, parents | extra, foreign)
    return alias
