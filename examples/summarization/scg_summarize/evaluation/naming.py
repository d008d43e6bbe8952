"""Result file names that carry the settings, and writing results without losing older ones.

Evaluating one run twice with other options must not replace the first result. So the default
file name of a result says how it was obtained:

* a model: ``<data>-<split>.<decoding>[.<rouge>].json``, e.g.
  ``scitldr-test.beam4-len10-40-ngram3-unkreplace.json``, with ``-top2`` (``--coarse-topk``),
  ``-first100`` (``--limit``), ``-ckpt-<name>`` (``--checkpoint``) when given;
* a baseline: ``<method>[-<param>]-<data>-<split>[.<rouge>].json``, e.g. ``lead3-cnndm-test.json``
  (the parameter only when it is not the method's default: ``lead3-k5-...``, ``prefix-b100-...``);
* the ROUGE part only when the ROUGE options differ from the defaults: ``refs-first``,
  ``nostem``, ``bytes75``, ``recall``, a metric list (digit matching, which ``auto`` turns on
  for runs trained with digit mapping, is not in the name; it is compared below).

`write_result_safely` then refuses to replace a file holding a result whose settings
(`result_settings`) differ from the new one, naming both; the same settings again (a
re-run) replace it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..decode_options import DecodeOptions
from .baselines import ExtractiveBaseline, get_baseline
from .report import result_settings, write_result
from .rouge import RougeOptions

__all__ = ["baseline_stem", "check_result_path", "decode_tag", "model_stem", "rouge_tag", "write_result_safely"]


def _number(value: float) -> str:
    return f"{value:g}".replace(".", "p")


def decode_tag(
    options: DecodeOptions, *, coarse_topk: int | None = None, limit: int | None = None, checkpoint: str | None = None
) -> str:
    """The decoding part of a model result's file name (see the module docstring)."""
    parts = [
        "greedy" if options.greedy else f"beam{options.beam_size}",
        f"len{options.min_len}-{options.max_len}",
        f"ngram{options.no_repeat_ngram}" if options.no_repeat_ngram else "noblock",
        f"unk{options.unk}",
    ]
    if options.length_penalty != 1.0:
        parts.append(f"lp{_number(options.length_penalty)}")
    if options.no_repeat_word:
        parts.append("norepeat")
    if options.block_digits:
        parts.append("nodigits")
    if options.recombine:
        parts.append("recombine")
    if coarse_topk is not None:
        parts.append(f"top{coarse_topk}")
    if limit is not None:
        parts.append(f"first{limit}")
    if checkpoint is not None:
        parts.append(f"ckpt-{Path(checkpoint).stem}")
    return "-".join(parts)


def rouge_tag(options: RougeOptions) -> str:
    """The ROUGE part of a file name: the options that differ from the defaults ('' if none)."""
    default = RougeOptions()
    parts = []
    if options.refs != default.refs:
        parts.append(f"refs-{options.refs}")
    if options.stemming != default.stemming:
        parts.append("nostem")
    if options.limit_bytes is not None:
        parts.append(f"bytes{options.limit_bytes}")
    if options.measure != default.measure:
        parts.append(options.measure)
    if tuple(options.metrics) != tuple(default.metrics):
        parts.append("-".join(m.replace("rouge", "r") for m in options.metrics))
    return "-".join(parts)


def model_stem(data_name: str, split: str, decode: str, rouge: RougeOptions) -> str:
    """``<data>-<split>.<decoding>[.<rouge>]`` (add ``.json`` / ``.summaries.jsonl``)."""
    extra = rouge_tag(rouge)
    return f"{data_name}-{split}.{decode}" + (f".{extra}" if extra else "")


def baseline_stem(baseline: ExtractiveBaseline, data_name: str, split: str, rouge: RougeOptions) -> str:
    """``<method>[-<param>]-<data>-<split>[.<rouge>]``; the method as given on the command line."""
    method = baseline.method
    if baseline.param != get_baseline(method).param:
        method += f"-{'b' if method == 'prefix' else 'k'}{baseline.param}"
    extra = rouge_tag(rouge)
    return f"{method}-{data_name}-{split}" + (f".{extra}" if extra else "")


def write_result_safely(
    result: Mapping[str, Any], path: str | Path, *, overwrite: bool = False, option: str = "--output"
) -> Path:
    """Write ``result`` to ``path`` unless ``path`` holds a result with other settings
    (`check_result_path`)."""
    check_result_path(result, path, overwrite=overwrite, option=option)
    return write_result(result, path)


def check_result_path(
    result: Mapping[str, Any], path: str | Path, *, overwrite: bool = False, option: str = "--output"
) -> None:
    """Raise ``FileExistsError`` when ``path`` holds a result with other settings than ``result``
    (unless ``overwrite``), naming the file, the settings that differ and the command's ``option``
    that writes elsewhere; a file that is not a result JSON is never replaced without ``overwrite``.
    ``evaluate`` asks before it decodes a split, `write_result_safely` before it writes.
    """
    path = Path(path)
    if path.is_dir():
        raise FileExistsError(f"{path}: a directory; expected the path of a result file ({option})")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise NotADirectoryError(f"{path}: {parent} is a file, not a folder ({option})")
    if path.exists() and not overwrite:
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            old = None
        if not isinstance(old, dict) or old.get("schema") != result.get("schema"):
            raise FileExistsError(f"{path}: exists and is not a result file; choose another {option}")
        before, after = result_settings(old), result_settings(result)
        changed = sorted(key for key in after if before.get(key) != after.get(key))
        if changed:
            detail = "; ".join(f"{key}: {before.get(key)!r} -> {after.get(key)!r}" for key in changed[:3])
            raise FileExistsError(
                f"{path}: holds a result with other settings ({detail}); write to another "
                f"{option} to keep both, or pass --overwrite to replace it"
            )
