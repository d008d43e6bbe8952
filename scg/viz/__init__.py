"""Drawing stochastic computation graphs (matplotlib), and the graph as a ``networkx.DiGraph``.
Not imported by the core: ``scg.viz.draw(g)``, ``scg.viz.to_networkx(g)``."""

from scg.graph.inspect import to_networkx
from scg.viz.draw import draw

__all__ = ["draw", "to_networkx"]
