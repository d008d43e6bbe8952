"""Gradient estimators for stochastic nodes. Each declares what it promises (``capabilities()``)."""

from scg.estimators.base import Estimator
from scg.estimators.pathwise import Pathwise
from scg.estimators.score_function import ScoreFunction

__all__ = ["Estimator", "Pathwise", "ScoreFunction"]
