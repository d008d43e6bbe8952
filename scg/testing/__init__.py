"""Tools for users to property-test gradient estimators: exact gradients by enumeration, an
estimator's exact mean, a statistical unbiasedness test, and hypothesis strategies for random small SCGs.

Not imported by ``import scg``; import ``scg.testing`` explicitly.
"""

from scg.testing.exact import QuadratureWarning, exact_expectation, exact_gradient, exact_hessian
from scg.testing.expected import expected_estimate
from scg.testing.structure import check_structure
from scg.testing.unbiased import (
    UnbiasedReport,
    assert_unbiased,
    check_unbiased,
    compare,
    estimate_gradients,
    estimate_gradients_batched,
)

__all__ = [
    "QuadratureWarning",
    "UnbiasedReport",
    "assert_unbiased",
    "check_structure",
    "check_unbiased",
    "compare",
    "estimate_gradients",
    "estimate_gradients_batched",
    "exact_expectation",
    "exact_gradient",
    "exact_hessian",
    "expected_estimate",
]
