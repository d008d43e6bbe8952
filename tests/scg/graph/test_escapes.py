"""scg.graph.escapes: the graph's handler of the tracker's events, and the draw check."""

from __future__ import annotations

import sys
import warnings
from types import FrameType

import pytest
import torch
from torch.distributions import Bernoulli, Normal

import scg
from scg.graph.escapes import EscapeReports, draw_loses_grad


def _nodes() -> list[scg.Node]:
    with scg.Graph() as g:
        scg.sample(Bernoulli(torch.tensor([0.5, 0.5])), name="z")
        scg.sample(Normal(torch.zeros(2), 1.0), name="x")
    return g.nodes


def _frame() -> FrameType:
    """A finished frame: its line no longer moves (a live frame's ``f_lineno`` follows it)."""
    return sys._getframe()


def test_an_escape_is_warned_once_per_source_line_naming_the_nodes() -> None:
    reports = EscapeReports(nodes=_nodes(), warn=True, strict=False)
    frame = _frame()
    with pytest.warns(scg.InfluenceLostWarning, match=r"node\(s\) 'z', 'x' left tensor land through float"):
        reports("escape", "float", 0b11, frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reports("escape", "float", 0b11, frame)  # the same line again: not repeated
    assert reports.seen == {(frame.f_code.co_filename, frame.f_lineno)}


def test_strict_raises_for_every_report_and_warn_false_is_silent() -> None:
    frame = _frame()
    strict = EscapeReports(nodes=_nodes(), warn=False, strict=True)
    with pytest.raises(scg.InfluenceLostError, match=r"bernoulli\(\) at .* draws from values computed from node"):
        strict("random", "bernoulli", 0b1, frame)
    with pytest.raises(scg.InfluenceLostError, match="strict=True"):
        strict("escape", "item", 0b1, frame)
    quiet = EscapeReports(nodes=_nodes(), warn=False, strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet("escape", "item", 0b1, frame)
        quiet("random", "bernoulli", 0, frame)
    assert not quiet.seen


def test_a_draw_from_parameters_names_them_when_no_node_is_involved() -> None:
    reports = EscapeReports(nodes=[], warn=True, strict=False)
    with pytest.warns(scg.UntrackedRandomnessWarning, match="probabilities that require grad"):
        reports("random", "multinomial", 0, _frame())


def test_a_write_into_a_scored_value_is_refused_and_into_a_private_copy_allowed() -> None:
    nodes = _nodes()
    frame = _frame()
    reports = EscapeReports(nodes=nodes, warn=False, strict=False)
    reports("write", "add_", 0, frame)  # z scored a private copy (the default)
    nodes[0].private = False
    with pytest.raises(scg.SCGError, match=r"add_\(\) at .* writes into the value of .*'z'"):
        reports("write", "add_", 0, frame)


def test_draw_loses_grad_only_for_a_draw_from_probabilities_that_require_grad() -> None:
    probs = torch.full((3,), 1 / 3, requires_grad=True)
    out = torch.multinomial(probs.detach(), 1)
    assert draw_loses_grad("multinomial", (probs, 1), out)
    assert draw_loses_grad("multinomial", (probs.expand(2, 3),), out)  # a view of one that requires grad
    assert not draw_loses_grad("multinomial", (probs.detach(), 1), out)
    assert not draw_loses_grad("randn_like", (probs,), torch.randn(3))  # reads only the shape
    assert not draw_loses_grad("_standard_gamma", (probs,), probs * 2)  # a pathwise draw keeps its gradient
    assert draw_loses_grad("normal", (probs,), probs * 2)  # torch.normal's gradient is zero by definition
