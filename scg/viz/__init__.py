"""Drawing stochastic computation graphs (matplotlib). Not imported by the core."""

from scg.viz.draw import draw

__all__ = ["draw"]
