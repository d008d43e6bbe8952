"""The configuration schema: every key's type and allowed range, checked all at once.

:func:`check_config` walks a raw configuration (the merged TOML tables plus ``--set``
overrides, before any dataclass is built) and returns *every* problem, one line each, naming
the key and the expected form::

    train.lr: expected a finite number > 0, got 'fast' (a string)
    train.batch_size: expected an integer >= 1, got 2.5
    model: expected a table of options, got 3

Types come from the annotations of the configuration dataclasses (so a new option is
type-checked without touching this file); ranges and choices from :data:`RULES`. Non-finite
floats (TOML's ``nan``/``inf``) are refused everywhere. :class:`ConfigError` carries the list.

Why dataclasses with this validator rather than pydantic: the configuration is already five
plain dataclasses shared with checkpoints, the decoders and other examples; a 150-line validator
keeps them as they are, adds no dependency to the example, and reports in the house format
(``key: expected FORM, got VALUE``), where pydantic would need a parallel model per table and a
translation of its error objects.
"""

from __future__ import annotations

import functools
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ..devices import DEVICE_SETTING, is_device_setting
from ..typed import did_you_mean

__all__ = ["COMPILE_BACKENDS", "PRECISIONS", "RULES", "ConfigError", "Rule", "check_config"]

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class ConfigError(ValueError):
    """A configuration with problems; ``problems`` has one line per bad key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Rule:
    """A key's allowed values beyond its type: ``test(value)`` and the words for it."""

    form: str
    test: Callable[[Any], bool]
    full: bool = False  #: ``form`` says everything (else it follows the type: "an integer >= 1")


def _at_least(low: float) -> Rule:
    return Rule(f">= {low:g}", lambda v: v >= low)


def _above(low: float) -> Rule:
    return Rule(f"> {low:g}", lambda v: v > low)


def _within(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Rule:
    lo, hi = "(" if open_low else "[", ")" if open_high else "]"
    return Rule(
        f"in {lo}{low:g}, {high:g}{hi}",
        lambda v: (v > low if open_low else v >= low) and (v < high if open_high else v <= high),
    )


def _one_of(*choices: str) -> Rule:
    return Rule("one of " + ", ".join(repr(c) for c in choices), lambda v: v in choices, full=True)


#: ``train.compile``: off ("") or a ``torch.compile`` backend (`.compiled`)
COMPILE_BACKENDS: tuple[str, ...] = ("", "inductor", "aot_eager", "eager")
#: ``train.precision``: fp32 (no autocast) or the objective under bf16 autocast (`.precision`)
PRECISIONS: tuple[str, ...] = ("fp32", "bf16")

_POSITIVE, _NON_NEGATIVE = _at_least(1), _at_least(0)
_SPLIT = Rule("a split name (letters, digits, _ and -)", lambda v: bool(_NAME.match(v)), full=True)

#: ``table.key`` -> its rule (keys without one are only type-checked).
RULES: dict[str, Rule] = {
    **{
        f"model.{k}": _POSITIVE
        for k in (
            "emb_dim",
            "hidden",
            "enc_layers",
            "dec_layers",
            "pos_dim",
            "conv_width",
            "conv_filters",
            "multi",
            "test_k",
        )
    },
    **{f"model.{k}": _NON_NEGATIVE for k in ("vocab_size", "num_chunks", "bow_dim", "init_range", "emb_init_std")},
    "model.dropout": _within(0, 1, open_high=True),
    "model.attention": _one_of("standard", "model1", "hier", "c2f"),
    "model.chunk_encoder": _one_of("conv", "bow"),
    "model.decoder_init": _one_of("encoder", "zero"),
    "model.abs_encoder": _one_of("none", "bow", "conv", "attention"),
    **{f"model.abs_{k}": _POSITIVE for k in ("context", "layers")},
    **{f"model.abs_{k}": _NON_NEGATIVE for k in ("window", "max_norm", "src_vocab", "tgt_vocab")},
    "model.damping": _within(0, 1, open_low=True, open_high=True),
    "model.pagerank_guard": _one_of("none", "softplus", "abs"),
    "model.temperature_s": _above(0),
    "model.temperature_u": _above(0),
    "model.max_src_len": _POSITIVE,
    "train.optimizer": _one_of("sgd", "adam", "adadelta"),
    "train.lr": _above(0),
    "train.lr_decay": _within(0, 1, open_low=True),
    "train.lr_schedule": _one_of("after_plateau", "on_plateau"),
    "train.normalize": _one_of("batch", "tokens"),
    "train.discount": _within(0, 1),
    "train.baseline_beta": _within(0, 1, open_low=True),
    "train.alternate": _within(0, 1),
    "train.batch_size": _POSITIVE,
    "train.log_every": _POSITIVE,
    "train.rl_weight": _within(0, 1),
    "train.reward": _one_of("rouge1", "rouge2", "rougeL"),
    "train.select_metric": _one_of("ppl", "rouge1", "rouge2", "rougeL"),
    "train.rollout_len": _NON_NEGATIVE,
    "train.select_examples": _POSITIVE,
    "train.compile": _one_of(*COMPILE_BACKENDS),
    "train.precision": _one_of(*PRECISIONS),
    "train.device": Rule(DEVICE_SETTING, is_device_setting, True),
    **{
        f"train.{k}": _NON_NEGATIVE
        for k in (
            "chunk_encoder_lr_scale",
            "max_grad_norm",
            "decay_patience",
            "epochs",
            "seed",
            "reward_scale",
            "checkpoint_every",
            "max_steps_per_epoch",
            "max_steps",
            "time_budget_s",
            "num_workers",
            "threads",
            "throttle_s",
            "pool_batches",
        )
    },
    **{f"data.{k}_split": _SPLIT for k in ("train", "valid", "test")},
    "data.max_target_len": _NON_NEGATIVE,
    "data.pad_targets": _NON_NEGATIVE,
    "data.regrid": Rule("[] or [M, N] with M, N >= 1", lambda v: v == [] or (len(v) == 2 and min(v) >= 1), True),
    "data.bucket_by": _one_of("tgt", "src", "both", "none"),
}


def _describe(value: Any) -> str:
    kinds = {str: "a string", bool: "a boolean", dict: "a table", list: "a list", int: "an integer", float: "a number"}
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    kind = kinds.get(type(value))
    return f"{text} ({kind})" if kind and isinstance(value, (str, dict, list)) else text


def _type_form(annotation: Any) -> tuple[str, Callable[[Any], bool]]:
    """The words for a field's type and a test of a TOML value against it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:  # X | None
        form, test = _type_form(next(a for a in args if a is not type(None)))
        return f"{form} (or none)", lambda v: v is None or test(v)
    if annotation is bool:
        return "true or false", lambda v: isinstance(v, bool)
    if annotation is int:
        return "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
    if annotation is float:
        return "a finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if annotation is str:
        return "a string", lambda v: isinstance(v, str)
    if origin is list and typing.get_args(annotation) == (int,):
        return (
            "a list of integers",
            lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
        )
    return "a value", lambda v: True  # pragma: no cover - every option today has one of the types above


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """Each field of the dataclass ``cls`` with its type (resolved once per class: the
    annotations are strings that `typing.get_type_hints` would evaluate on every call)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _check_table(table: str, cls: type, values: Any, problems: list[str]) -> None:
    if not isinstance(values, dict):
        problems.append(f"{table}: expected a table of options ([{table}] in TOML), got {_describe(values)}")
        return
    known = _field_types(cls)
    for key, value in values.items():
        where = f"{table}.{key}"
        if key not in known:
            problems.append(f"{where}: unknown option{did_you_mean(key, known)} (known: {', '.join(sorted(known))})")
            continue
        form, is_type = _type_form(known[key])
        rule = RULES.get(where)
        expected = form if rule is None else rule.form if rule.full else f"{form} {rule.form}"
        if not is_type(value):
            problems.append(f"{where}: expected {expected}, got {_describe(value)}")
        elif rule is not None and value is not None and not rule.test(value):
            problems.append(f"{where}: expected {expected}, got {_describe(value)}")


def check_config(data: dict[str, Any], tables: dict[str, type], checked_apart: tuple[str, ...] = ()) -> list[str]:
    """Every problem of a raw configuration ``data`` (``tables``: table name -> dataclass;
    ``checked_apart``: the names of tables the caller checks itself, left out of ``data``)."""
    problems: list[str] = []
    for key, value in data.items():
        if key in tables:
            _check_table(key, tables[key], value, problems)
        elif key in ("name", "description"):
            if not isinstance(value, str):
                problems.append(f"{key}: expected a string, got {_describe(value)}")
        elif key != "extends":
            names = sorted((*tables, *checked_apart))
            problems.append(f"{key}: unknown configuration table{did_you_mean(key, names)} (known: {', '.join(names)})")
    if problems:
        return problems
    model, train = data.get("model", {}), data.get("train", {})
    attention = model.get("attention", "standard")
    if train.get("alternate", 0) > 0 and attention != "c2f":
        problems.append("train.alternate: +ALTERNATE (> 0) needs model.attention = 'c2f'")
    if model.get("multi", 1) > 1 and attention != "c2f":
        problems.append("model.multi: +MULTI (> 1) needs model.attention = 'c2f'")
    if model.get("test_k", 1) > 1 and attention != "c2f":  # (soft attention reads every chunk)
        problems.append("model.test_k: reading the top k > 1 chunks at test time needs model.attention = 'c2f'")
    return problems
