"""The checks of the testing helpers' arguments.

A property test that is handed the wrong kind of argument must fail loudly: a helper that
differentiated with respect to tensors the program never uses, or drew no estimate at all, would
report "unbiased" for any program. Each check raises `scg.SCGError` naming the helper, the
argument, what it expects and what it found.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import Any

import torch

from scg.errors import SCGError

__all__ = [
    "Params",
    "at_least",
    "keyword_options",
    "non_negative",
    "open_unit",
    "parameters",
    "program_without_arguments",
    "seed_of",
    "unused_parameters",
]

#: what the helpers take as ``params``: one tensor, or several (a list, a tuple, ``model.parameters()``)
Params = torch.Tensor | Iterable[torch.Tensor]


def parameters(params: Params, where: str) -> list[torch.Tensor]:
    """``params`` as a list: one tensor is one parameter (not the list of its rows, which
    ``list(theta)`` would give: views of ``theta`` that the program never uses); each must be a
    tensor that requires grad."""
    if isinstance(params, torch.Tensor):
        out = [params]
    elif isinstance(params, Iterable) and not isinstance(params, (str, bytes)):
        out = list(params)
    else:
        raise SCGError(f"{where}: params must be a tensor or a sequence of tensors, got {type(params).__name__}")
    if not out:
        raise SCGError(f"{where}: params is empty; pass the tensors to differentiate with respect to")
    for i, p in enumerate(out):
        if not isinstance(p, torch.Tensor):
            raise SCGError(f"{where}: params[{i}] must be a tensor, got {type(p).__name__}")
        if not p.requires_grad:
            raise SCGError(
                f"{where}: params[{i}] (shape {tuple(p.shape)}) does not require grad, so its gradient "
                "is zero in every run and the check could not fail; call .requires_grad_() on it"
            )
    return out


def unused_parameters(grads: Iterable[torch.Tensor | None], where: str) -> None:
    """Refuse a gradient that reached none of the parameters (``torch.autograd.grad`` gave None for
    every one): the program does not use them, so every estimate and the exact gradient are zero
    and a comparison of the two passes whatever the estimator does."""
    if all(g is None for g in grads):
        raise SCGError(
            f"{where}: the program's expected cost does not depend on any of params (no gradient "
            "reaches them); pass the tensors the program's distributions and costs are computed "
            "from (a tensor itself, not list(tensor): its rows are new views the program never uses)"
        )


def at_least(value: object, low: int, name: str, where: str) -> int:
    """``value`` as an int ``>= low`` (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise SCGError(f"{where}: {name} must be an int >= {low}, got {value!r}")
    return int(value)


def open_unit(value: object, name: str, where: str) -> float:
    """``value`` as a float in the open interval (0, 1) (a test's false-failure rate)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 < float(value) < 1.0:
        raise SCGError(f"{where}: {name} must be a number in (0, 1), got {value!r}")
    return float(value)


def non_negative(value: object, name: str, where: str) -> float:
    """``value`` as a finite float ``>= 0`` (a tolerance)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not (math.isfinite(float(value)) and float(value) >= 0)
    ):
        raise SCGError(f"{where}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def program_without_arguments(program: object, where: str) -> None:
    """``program`` must be a callable the helper can call with no arguments."""
    if not callable(program):
        raise SCGError(f"{where}: program must be a function of no arguments, got {type(program).__name__}")
    try:
        inspect.signature(program).bind()
    except TypeError:
        raise SCGError(
            f"{where}: program must be callable with no arguments (it calls scg.sample and scg.cost; "
            f"bind its inputs with a closure or functools.partial), got {program!r}"
        ) from None
    except ValueError:  # (a builtin without a signature: called as it is)
        pass


def seed_of(value: object, where: str) -> int:
    """``value`` as a seed: an int (a float would be truncated, a string refused by torch)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise SCGError(f"{where}: seed must be an int, got {value!r}")
    return int(value)


def keyword_options(options: object, accepting: Callable[..., Any], name: str, where: str) -> dict[str, Any]:
    """``options`` (None or a dict) as the keyword arguments of ``accepting``, checked before any
    work: a misspelt key failed inside the first estimate, after the exact gradient was computed."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise SCGError(f"{where}: {name} must be a dict of keyword arguments, got {type(options).__name__}")
    known = [
        k
        for k, p in inspect.signature(accepting).parameters.items()
        if p.kind is p.KEYWORD_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and k != "self")
    ]
    unknown = [k for k in options if k not in known]
    if unknown:
        raise SCGError(f"{where}: {name} has unknown key(s) {unknown}; expected some of {known}")
    return dict(options)
