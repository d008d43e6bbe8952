"""Credit assignment: everything from a recorded graph to its surrogate loss.

* :mod:`scg.credit.plan`: the :class:`~scg.credit.plan.CreditPlan` of a graph (which node is
  credited with which cost, with what weight), built once per graph signature;
* :mod:`scg.credit.surrogate`: Algorithm 1 of Schulman et al. (2015) on a plan;
* :mod:`scg.credit.dice`: the DiCE and Loaded DiCE objectives on the same plan;
* :mod:`scg.credit.traced`: the surrogate inside ``torch.compile`` (no NumPy, no host reads);
* :mod:`scg.credit.plates`, :mod:`scg.credit.sample_dims`: per-element credit and sample
  dimensions, the two rules the plan applies;
* :mod:`scg.credit.soundness`: the checks that the recorded graph still describes the program.
"""

from scg.credit.surrogate import objective, surrogate_loss

__all__ = ["objective", "surrogate_loss"]
