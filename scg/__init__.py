"""scg: stochastic computation graphs for PyTorch (Schulman, Heess, Weber & Abbeel 2015).

Write ordinary PyTorch code inside ``with scg.Graph() as g:``; mark random choices with
[`sample`][scg.sample] and objectives with [`cost`][scg.cost]; ``g.surrogate_loss()`` (or
``scg.surrogate_loss(g)``) is a scalar whose gradient is an unbiased estimate of ∇_θ E[Σ costs],
each stochastic node credited only with the costs it influences (Algorithm 1). Importing scg changes nothing in torch.
"""

from scg import baselines, estimators
from scg.credit.graph import Graph
from scg.credit.surrogate import surrogate_loss
from scg.credit.traced import skip_scg_guards
from scg.errors import (
    InfluenceLostError,
    InfluenceLostWarning,
    NonDifferentiablePathWarning,
    SCGError,
    UntrackedRandomnessWarning,
)
from scg.estimators import Pathwise, ScoreFunction
from scg.graph import (
    CostNode,
    DeterministicNode,
    Node,
    StochasticNode,
    cost,
    deterministic,
    influenced_by,
    sample,
)
from scg.graph.cached import Cached
from scg.graph.log_prob import log_prob
from scg.graph.positions import declare_rowwise
from scg.graph.structure import Declared

__version__ = "0.1.0"

__all__ = [
    "Cached",
    "CostNode",
    "Declared",
    "DeterministicNode",
    "Graph",
    "InfluenceLostError",
    "InfluenceLostWarning",
    "Node",
    "NonDifferentiablePathWarning",
    "Pathwise",
    "SCGError",
    "ScoreFunction",
    "StochasticNode",
    "UntrackedRandomnessWarning",
    "__version__",
    "baselines",
    "cost",
    "declare_rowwise",
    "deterministic",
    "estimators",
    "influenced_by",
    "log_prob",
    "sample",
    "skip_scg_guards",
    "surrogate_loss",
]
