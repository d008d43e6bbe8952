"""Baselines b_v subtracted from downstream costs (Theorem 2 of Schulman et al. 2015).

==================  ==========================================================  =============
baseline            b_v                                                         unbiased
==================  ==========================================================  =============
``Constant``        a number                                                    yes
``EMA``             running average of past learning signals, per node/step     yes
``Learned``         f_φ(x) of inputs from before the sample, trained by MSE     yes
``LeaveOneOut``     mean of the other k − 1 samples' signals (n=k)              yes
``VIMCO``           leave-one-out bound for log-mean-exp objectives (n=k)       yes
``SelfCritical``    cost of a greedy rerun (``scg.estimators.greedy``)          yes
``Normalized``      NVIL centring (unbiased) and scaling by 1/max(1, std)       centring only
==================  ==========================================================  =============
"""

from scg.baselines.base import Baseline, BaselineResult
from scg.baselines.constant import Constant
from scg.baselines.ema import EMA
from scg.baselines.learned import Learned
from scg.baselines.loo import LeaveOneOut
from scg.baselines.normalized import Normalized
from scg.baselines.self_critical import SelfCritical
from scg.baselines.vimco import VIMCO

__all__ = [
    "EMA",
    "VIMCO",
    "Baseline",
    "BaselineResult",
    "Constant",
    "Learned",
    "LeaveOneOut",
    "Normalized",
    "SelfCritical",
]
