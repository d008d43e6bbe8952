"""What ``scg.sample`` (`scg.graph.sampling`) and ``scg.cost`` (`scg.graph.costs`) share: the open
graph and the user's line that called them, and what a node's or a cost's baseline reads (its
declared inputs and their version counters); the fields every node record has are stored by
`GraphRecord.new_node`. A graph's other
calls: ``scg.deterministic`` and ``scg.influenced_by`` in `scg.graph.annotate`, ``scg.log_prob``
in `scg.graph.log_prob`."""

from __future__ import annotations

import torch

from scg.errors import SCGError
from scg.graph.graph import GraphRecord, current_graph, eager_graph, is_compiling
from scg.graph.influence import sum_masks
from scg.graph.nodes import BaselineInputs, Location, caller_location, value_version

__all__ = ["baseline_inputs", "check_plates", "open_graph", "outside_graph"]


def open_graph(fn: str, name: str | None) -> tuple[GraphRecord, Location | str]:
    """The open graph and the user's line that called ``scg.<fn>`` (one compile check for both).
    ``scg.sample`` and ``scg.cost``, which run for every node, do the same inline."""
    compiling = is_compiling()
    g = current_graph(True) if compiling else eager_graph()
    location = caller_location(compiling)
    if g is None:
        raise outside_graph(fn, name, location)
    return g, location


def outside_graph(fn: str, name: str | None, location: Location | str) -> SCGError:
    if torch._C._current_graph_task_id() != -1:  # (inside the autograd engine's backward pass)
        return SCGError(
            f"scg.{fn}(name={name!r}) at {location} was called during the backward pass, outside any "
            "graph: torch.utils.checkpoint recomputing a function that calls scg? Checkpoint only the "
            "deterministic parts (the networks), and call scg.sample / scg.cost outside them"
        )
    return SCGError(
        f"scg.{fn}(name={name!r}) at {location} was called outside a graph; "
        "call it inside a `with scg.Graph() as g:` block (in a worker thread: run the "
        "worker under g.wrap(fn) or `with g.in_thread():`)"
    )


def check_plates(plates: object, fn: str, name: str | None, location: Location | str) -> None:
    if plates is not None and (isinstance(plates, bool) or not isinstance(plates, int) or plates < 0):
        raise SCGError(
            f"scg.{fn}(name={name!r}, plates=...) at {location}: expected None or an int >= 0, got {plates!r}"
        )


def baseline_inputs(g: GraphRecord, baseline: object) -> BaselineInputs | None:
    """What a baseline's declared ``inputs`` (``Learned.given(...)``) are computed from, and their
    version counters; None for a baseline without inputs."""
    inputs = getattr(baseline, "inputs", None)
    if inputs is None:
        return None
    if g.tracked:  # (version counters are properties: read with the tracker's mode off)
        with torch._C.DisableTorchFunction():
            return _inputs_record(g, inputs)
    return _inputs_record(g, inputs)


def _inputs_record(g: GraphRecord, inputs: object) -> BaselineInputs:
    if type(inputs) is tuple:  # (``Learned.given``'s tuple of tensors: its tensors read in one loop)
        mask = 0
        versions: list[tuple[torch.Tensor, int]] = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                mask |= g.mask(x)
                version = value_version(x)
                if version is not None:
                    versions.append((x, version))
            else:
                mask |= sum_masks(g, x)
                versions += _versions(x)
        return BaselineInputs(mask=mask, versions=versions)
    return BaselineInputs(mask=sum_masks(g, inputs), versions=_versions(inputs))


def _versions(values: object) -> list[tuple[torch.Tensor, int]]:
    """(tensor, version counter) for each tensor in ``values``: writes after it are detected."""
    if isinstance(values, torch.Tensor):
        version = value_version(values)
        return [] if version is None else [(values, version)]
    if isinstance(values, (list, tuple)):
        return [x for v in values for x in _versions(v)]
    return []
