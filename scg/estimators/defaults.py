"""The estimator a stochastic node gets when ``scg.sample`` is not given one."""

from __future__ import annotations

from torch.distributions import Distribution

from scg.estimators.base import Estimator
from scg.estimators.pathwise import Pathwise
from scg.estimators.score_function import ScoreFunction

__all__ = ["default_for"]

#: the default estimators (stateless without a baseline, so one object serves every node)
_PATHWISE = Pathwise()
_SCORE_FUNCTION = ScoreFunction()


def default_for(dist: Distribution) -> Estimator:
    """`Pathwise` when ``dist.has_rsample``, else `ScoreFunction`."""
    return _PATHWISE if dist.has_rsample else _SCORE_FUNCTION
