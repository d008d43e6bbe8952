"""Graph inspection and drawing."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.distributions import Categorical, Normal

import scg
import scg.viz


def _graph() -> tuple[scg.Graph, torch.Tensor]:
    theta = torch.zeros(4, requires_grad=True)
    w = torch.ones(4, requires_grad=True)
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=theta), name="z")
        h = scg.deterministic(w[z] * 2.0, name="h")
        x = scg.sample(Normal(h, 1.0), name="x")
        scg.cost((x - 1.0) ** 2, name="c")
        scg.cost(h * 0.0 + theta.sum(), name="reg")
    return g, theta


def test_to_networkx_kinds_and_direct_edges() -> None:
    g, theta = _graph()
    nxg = scg.viz.to_networkx(g)
    kinds = dict(nxg.nodes(data="kind"))
    assert kinds["z"] == "stochastic" and kinds["x"] == "stochastic"
    assert kinds["h"] == "deterministic" and kinds["c"] == "cost"
    params = [n for n, k in kinds.items() if k == "parameter"]
    assert len(params) == 2
    edges = set(nxg.edges)
    assert {("z", "h"), ("h", "x"), ("x", "c"), ("h", "reg")} <= edges
    assert ("z", "x") not in edges  # z reaches x only through h
    assert g.influences("z", "c") and g.influences("z", "reg")
    assert not g.influences("x", "reg")


def test_parameter_names_and_draw(tmp_path: Path) -> None:
    g, theta = _graph()
    nxg = scg.viz.to_networkx(g, names={id(theta): "theta"})
    assert ("theta", "z") in nxg.edges
    ax = scg.viz.draw(g)
    out = tmp_path / "g.png"
    ax.figure.savefig(out)
    assert out.stat().st_size > 1000
    labels = {t.get_text() for t in ax.texts}
    assert {"z", "x", "h", "c"} <= labels
