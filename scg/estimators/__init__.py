"""Gradient estimators for stochastic nodes. Each declares what it promises (``capabilities()``).

=======================  ========  =============  =====  ============  ============
estimator                unbiased  needs_rsample  score  higher_order  multi_sample
=======================  ========  =============  =====  ============  ============
``ScoreFunction``        yes       no             yes    yes           yes
``Pathwise``             yes       yes            no     yes           yes
``Enumerate``            exact     no             no     yes (exact)   no
``RELAX``                yes       no             yes    no            yes
``GumbelSoftmax``        **no**    no             no     no            yes
``ARM``                  yes       no             yes    no            pairs (n=2m)
``DisARM``               yes       no             yes    no            pairs (n=2m)
``CategoricalDisARM``    yes       no             yes    no            pairs (n=2m)
``ARSM``                 yes       no             yes    no            n=r(1+K(K-1)/2)
``REBAR``                yes       no             yes    no            yes
``LAX``                  yes       no             yes    no            yes
``MeasureValued``        yes       no             no     no            no (points)
``UnorderedSet``         yes       no             no     no            n=k w/o repl.
``RaoBlackwellized``     yes       no             no     no            no (top-k + 1)
``IndeCateR``            yes       no             no     no            no (D·K)
``GumbelRao``            **no**    no             no     no            yes
``GumbelSparsemax``      **no**    no             no     no            yes
``GumbelEntmax``         **no**    no             no     no            yes
=======================  ========  =============  =====  ============  ============

Also: `greedy` (an intervention for self-critical reruns) and
[`multinomial_attention`][scg.estimators.multinomial_attention] (the C2F paper's +MULTI). See ``docs/estimators.md``.
"""

from scg.estimators.arm import ARM
from scg.estimators.arsm import ARSM
from scg.estimators.base import Estimator
from scg.estimators.control import LearnedControl
from scg.estimators.defaults import default_for
from scg.estimators.disarm import DisARM
from scg.estimators.disarm_categorical import CategoricalDisARM
from scg.estimators.enumerate import Enumerate
from scg.estimators.greedy import greedy
from scg.estimators.gumbel_rao import GumbelRao
from scg.estimators.indecater import IndeCateR
from scg.estimators.lax import LAX
from scg.estimators.measure_valued import MeasureValued
from scg.estimators.multinomial import multinomial_attention
from scg.estimators.pathwise import Pathwise
from scg.estimators.rao_blackwell import RaoBlackwellized
from scg.estimators.rebar import REBAR
from scg.estimators.relax import RELAX
from scg.estimators.relaxed import GumbelSoftmax
from scg.estimators.score_function import ScoreFunction
from scg.estimators.sparse_relaxations import GumbelEntmax, GumbelSparsemax
from scg.estimators.unordered_set import UnorderedSet

__all__ = [
    "ARM",
    "ARSM",
    "LAX",
    "REBAR",
    "RELAX",
    "CategoricalDisARM",
    "DisARM",
    "Enumerate",
    "Estimator",
    "GumbelEntmax",
    "GumbelRao",
    "GumbelSoftmax",
    "GumbelSparsemax",
    "IndeCateR",
    "LearnedControl",
    "MeasureValued",
    "Pathwise",
    "RaoBlackwellized",
    "ScoreFunction",
    "UnorderedSet",
    "default_for",
    "greedy",
    "multinomial_attention",
]
