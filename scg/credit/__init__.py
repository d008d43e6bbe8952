"""Credit assignment: everything from a recorded graph to its surrogate loss.

* `scg.credit.plan`: the `CreditPlan` of a graph (which node is
  credited with which cost, with what weight), built once per graph signature;
* `scg.credit.surrogate`: Algorithm 1 of Schulman et al. (2015) on a plan;
* `scg.credit.dice`: the DiCE and Loaded DiCE objectives on the same plan;
* `scg.credit.traced`: the surrogate inside ``torch.compile`` (no NumPy, no host reads);
* `scg.credit.plates`, `scg.credit.sample_dims`: per-element credit and sample
  dimensions, the two rules the plan applies;
* `scg.credit.soundness`: the checks that the recorded graph still describes the program.
"""

from scg.credit.surrogate import objective, surrogate_loss

__all__ = ["objective", "surrogate_loss"]
