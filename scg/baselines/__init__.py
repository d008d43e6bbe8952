"""Baselines b_v subtracted from downstream costs (Theorem 2 of Schulman et al. 2015)."""

from scg.baselines.base import Baseline, BaselineResult
from scg.baselines.constant import Constant
from scg.baselines.ema import EMA
from scg.baselines.learned import Learned

__all__ = ["EMA", "Baseline", "BaselineResult", "Constant", "Learned"]
