"""`check_field_types` (and `field_type_problem`): the fields of a dataclass built in Python
checked against their declared types (a TOML table is checked by `train.schema` before any
dataclass is built; a dataclass built in Python is not, and ``input_feed="false"`` was taken as
true); `did_you_mean`: the hint every refusal of an unknown option or key gives."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

__all__ = ["check_field_types", "did_you_mean", "field_type_problem"]

_EXPECTED = {
    "bool": "true or false",
    "float": "a finite number",
    "int": "an integer",
    "tuple[str, ...]": "a tuple of strings",
}


def _is(kind: str, value: Any) -> bool | None:
    """Whether ``value`` is of the declared type ``kind`` (None: a type not checked here)."""
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "str":
        return isinstance(value, str)
    if kind == "tuple[str, ...]":
        return isinstance(value, tuple) and all(isinstance(item, str) for item in value)
    return None


def check_field_types(obj: Any, prefix: str) -> None:
    """``ValueError`` naming the first field of the dataclass ``obj`` whose value is not of its declared
    type (`field_type_problem`), as ``{prefix}{field} must be {expected}, got {value!r}``."""
    problem = field_type_problem(obj)
    if problem is not None:
        name, expected, value = problem
        raise ValueError(f"{prefix}{name} must be {expected}, got {value!r}")


def field_type_problem(obj: Any) -> tuple[str, str, Any] | None:
    """The first field of the dataclass ``obj`` whose value is not of its declared type, as (its name,
    what it must be, its value), or None: ``bool``, ``int`` (not a bool), ``float`` (a finite
    number), ``str``, ``tuple[str, ...]``, each also ``| None``; fields of other types are left to
    their own checks."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        optional = kind.endswith(" | None")
        if optional:
            if value is None:
                continue
            kind = kind.removesuffix(" | None")
        if _is(kind, value) is False:
            return f.name, _EXPECTED.get(kind, f"a {kind}") + (" (or None)" if optional else ""), value
    return None


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``"; did you mean 'hidden'?"`` when one of the ``known`` names is close to the unknown
    ``key`` (a misspelling), else ``""``: appended to the refusal that names ``key``."""
    match = difflib.get_close_matches(key, list(known), n=1)
    return f"; did you mean {match[0]!r}?" if match else ""
