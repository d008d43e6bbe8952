"""Draw an SCG in the convention of Schulman et al. (2015), Figure 1.

Stochastic nodes are circles, deterministic nodes squares, parameters plain labels (inputs),
costs diamonds; nodes are laid out in columns by their step (or creation order) and arrows show
direct influence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx

from scg.graph.graph import GraphRecord
from scg.graph.inspect import to_networkx

if TYPE_CHECKING:
    import matplotlib.axes

__all__ = ["draw"]

_STYLE = {
    "stochastic": {"node_shape": "o", "node_color": "#fde2c8"},
    "deterministic": {"node_shape": "s", "node_color": "#d8e8f8"},
    "cost": {"node_shape": "D", "node_color": "#f4cccc"},
    "parameter": {"node_shape": "s", "node_color": "#ffffff"},
}


def _layout(g: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Layered layout: x = longest path from a source, y spreads nodes within a layer."""
    depth: dict[str, int] = {}
    for n in nx.topological_sort(g):
        preds = list(g.predecessors(n))
        depth[n] = 0 if not preds else 1 + max(depth[p] for p in preds)
    layers: dict[int, list[str]] = {}
    for n, d in depth.items():
        layers.setdefault(d, []).append(n)
    pos = {}
    for d, members in layers.items():
        for i, n in enumerate(members):
            pos[n] = (float(d), float(i) - (len(members) - 1) / 2.0)
    return pos


def draw(
    graph: GraphRecord,
    ax: matplotlib.axes.Axes | None = None,
    *,
    parameters: bool = True,
    node_size: int = 1400,
    font_size: int = 9,
    **kwargs: Any,
) -> matplotlib.axes.Axes:
    """Draw ``graph`` on ``ax`` (a new figure when None) and return the axes.

    Args:
        parameters: show parameter nodes found through autograd.
        kwargs: passed to `scg.graph.inspect.to_networkx` (e.g. ``names=``).
    """
    g = to_networkx(graph, parameters=parameters, **kwargs)
    if ax is None:
        import matplotlib.pyplot as plt  # here: importing pyplot picks a GUI backend (~1 s); scg.viz stays cheap

        width = max(4.0, 1.6 * (1 + max((p[0] for p in _layout(g).values()), default=0)))
        _, ax = plt.subplots(figsize=(width, 3.5))
    pos = _layout(g)
    for kind, style in _STYLE.items():
        nodes = [n for n, k in g.nodes(data="kind") if k == kind]
        if not nodes:
            continue
        nx.draw_networkx_nodes(
            g, pos, nodelist=nodes, ax=ax, node_size=node_size, edgecolors="black", linewidths=1.0, **style
        )
    nx.draw_networkx_edges(g, pos, ax=ax, node_size=node_size, arrows=True, arrowsize=14)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=font_size)
    ax.set_axis_off()
    ax.margins(0.15)
    return ax
