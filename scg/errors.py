"""Errors and warnings raised by scg.

Every error names the node (and the file and line where it was created) so that a user can find the
offending ``scg.sample`` or ``scg.cost`` call without reading a traceback from deep inside torch.
"""

from __future__ import annotations

__all__ = [
    "InfluenceLostError",
    "InfluenceLostWarning",
    "NonDifferentiablePathWarning",
    "SCGError",
    "UntrackedRandomnessWarning",
    "expect_bool",
]


class SCGError(ValueError):
    """Misuse of a stochastic computation graph: bad input, a call outside a graph, a bad shape."""


def expect_bool(value: object, what: str) -> bool:
    """``value`` if it is ``True`` or ``False``; else `SCGError` naming ``what`` (an argument, as
    ``"GumbelSoftmax(hard=...)"``): ``"no"`` or a baseline object passed for a flag would be
    taken as ``True``."""
    if type(value) is not bool:
        raise SCGError(f"{what}: expected True or False, got {value!r}")
    return value


class InfluenceLostWarning(UserWarning):
    """A value computed from a stochastic node left tensor land (``.item()``, ``bool()``, ...).

    scg finds which costs a stochastic node influences by following data flow through torch
    operations. Python numbers and Python control flow are invisible to it, so a cost computed from
    such a value would silently lose its dependency on the node. scg warns instead; declare the
    dependency with [`scg.influenced_by`][scg.influenced_by] (or silence the warning with
    ``warnings.simplefilter("ignore", scg.InfluenceLostWarning)`` when the escape is harmless).
    """


class InfluenceLostError(SCGError):
    """Raised instead of `InfluenceLostWarning` (and `UntrackedRandomnessWarning`)
    in a ``scg.Graph(strict=True)``."""


class UntrackedRandomnessWarning(InfluenceLostWarning):
    """A random draw (``torch.bernoulli``, ``torch.multinomial``, ``Distribution.sample()``, ...)
    on values computed from stochastic nodes, made outside ``scg.sample``: it is not a stochastic
    node, so the gradient misses its dependence on the parameters."""


class NonDifferentiablePathWarning(UserWarning):
    """A node differentiated pathwise (``rsample``) influences a cost only through operations
    autograd cannot differentiate (a step function, ``detach()``, ``torch.no_grad()``): its
    pathwise gradient there is zero, which is biased; use ``estimator=scg.ScoreFunction()``."""
