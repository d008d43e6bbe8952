"""Loading a trained run directory as a step decoder with its vocabulary and preprocessing.

A run directory is recognised by the first loader in `LOADERS` that accepts it. Loaders
return a [`LoadedRun`][scg_summarize.decoding.loading.LoadedRun]; new run formats are added with `register_loader`.

Built in:

* the trainer's run directories (``config.json`` + ``best.pt``), registered by
  `adapters`;
* ``decoder.json`` (generic): ``{"factory": "package.module:function", "model": NAME,
  "prep_options": {...}, "data": DIR, ...}``. The factory is called as
  ``factory(run_dir, spec, coarse_topk=K, device=D)`` and must return a
  `StepDecoder`. The vocabulary is ``run_dir/vocab.txt``
  or, failing that, the data directory's; the preprocessing options come from the spec or the
  data's ``meta.json``. `scg_summarize.decoding.toy.write_toy_run` writes such a run.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.options import PrepOptions
from ..data.storage import META_FILE, VOCAB_FILE, read_meta
from ..data.vocab import Vocab
from .inputs import SourceDocument, regrid_document
from .protocol import StepDecoder

__all__ = ["INPUT_OPTIONS", "LOADERS", "LoadedRun", "RunLoadError", "input_mismatch", "load_run", "register_loader"]

DECODER_SPEC = "decoder.json"


#: The preprocessing options that change what the model reads (the chunk grid and the words).
INPUT_OPTIONS: tuple[str, ...] = (
    "tokenizer", "lowercase", "digits_to_hash", "split_sentences", "layout", "num_chunks", "chunk_len",
)  # fmt: skip
_GRID_OPTIONS = ("layout", "num_chunks", "chunk_len")


def input_mismatch(trained: PrepOptions, found: PrepOptions, *, regrid: bool = False) -> list[str]:
    """The `INPUT_OPTIONS` on which a corpus (``found``) differs from the preprocessing the
    run was trained with, as ``"name: found (trained: value)"``; the chunk grid is not compared
    when the run re-cuts documents itself (``regrid``)."""
    out = []
    for name in INPUT_OPTIONS:
        if regrid and name in _GRID_OPTIONS:
            continue
        a, b = getattr(trained, name), getattr(found, name)
        if a != b:
            out.append(f"{name}={b!r} (the run was trained with {a!r})")
    return out


class RunLoadError(ValueError):
    """A run directory that cannot be loaded; the message names the directory and file."""


@dataclass
class LoadedRun:
    """A model ready for decoding.

    Attributes:
        decoder: the step decoder (see `protocol`).
        vocab: the model's vocabulary.
        prep_options: how raw text must be preprocessed for this model.
        model: the model's name for tables (``STANDARD``, ``C2F``, ...).
        run_dir: the run directory.
        data_dir: the prepared corpus the run was trained on, when recorded.
        info: anything else worth reporting (checkpoint, epoch, settings).
        regrid: ``(M, N)`` when the model reads the source re-cut into another chunk grid
            (the trainer's ``data.regrid``); apply `prepare` to documents.
        eval_table: the run configuration's ``[eval]`` table, when it has one: its decoding
            settings are the run's defaults (see
            [`resolve_decode_options`][scg_summarize.decoding.options.resolve_decode_options]).
    """

    decoder: StepDecoder[Any]
    vocab: Vocab
    prep_options: PrepOptions
    model: str
    run_dir: Path
    data_dir: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)
    regrid: tuple[int, int] | None = None
    eval_table: dict[str, Any] | None = None

    def prepare(self, docs: Iterable[SourceDocument]) -> Iterator[SourceDocument]:
        """``docs`` in the chunk grid the model reads (re-cut when the run uses a regrid)."""
        for doc in docs:
            yield doc if self.regrid is None else regrid_document(doc, *self.regrid)


Loader = Callable[..., "LoadedRun | None"]
LOADERS: list[tuple[str, Loader]] = []


def register_loader(name: str, loader: Loader, *, first: bool = False) -> None:
    """Add a loader ``loader(run_dir, *, checkpoint, coarse_topk, device, data_dir) -> LoadedRun
    | None`` (``None``: not my format). ``first`` puts it before the others."""
    LOADERS[:] = [(n, f) for n, f in LOADERS if n != name]
    if first:
        LOADERS.insert(0, (name, loader))
    else:
        LOADERS.append((name, loader))


def _import_factory(target: str, where: Path) -> Callable[..., Any]:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise RunLoadError(f"{where}: 'factory' must look like 'package.module:function', got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise RunLoadError(f"{where}: cannot import {module_name!r} named by 'factory': {err}") from err
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise RunLoadError(f"{where}: {module_name!r} has no callable {attr!r}")
    return factory  # type: ignore[no-any-return]


def _resolve_data_dir(run_dir: Path, value: Any) -> Path | None:
    if not value:
        return None
    path = Path(str(value))
    if not path.is_absolute() and not path.exists():
        path = run_dir / path
    return path


def load_vocab_and_options(
    run_dir: Path, data_dir: Path | None, prep: Mapping[str, Any] | None, where: Path
) -> tuple[Vocab, PrepOptions]:
    """The vocabulary (run's own ``vocab.txt`` or the data's) and the preprocessing options
    (given, or from the data's ``meta.json``)."""
    vocab_path = run_dir / VOCAB_FILE
    if not vocab_path.is_file() and data_dir is not None:
        vocab_path = data_dir / VOCAB_FILE
    if not vocab_path.is_file():
        hint = f"nor in {data_dir}" if data_dir is not None else "and no data directory is known: pass --data DIR"
        raise RunLoadError(f"{where}: no {VOCAB_FILE} in the run directory ({hint})")
    if prep is None:
        if data_dir is None or not (data_dir / META_FILE).is_file():
            raise RunLoadError(f"{where}: no preprocessing options and no data directory with {META_FILE}")
        prep = read_meta(data_dir)["options"]
    try:
        return Vocab.load(vocab_path), PrepOptions.from_dict(dict(prep))
    except (ValueError, TypeError) as err:
        raise RunLoadError(f"{where}: {err}") from err


def _load_spec_run(
    run_dir: Path, *, checkpoint: str | None, coarse_topk: int | None, device: str, data_dir: str | Path | None = None
) -> LoadedRun | None:
    spec_path = run_dir / DECODER_SPEC
    if not spec_path.is_file():
        return None
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RunLoadError(f"{spec_path}:{err.lineno}: invalid JSON ({err.msg})") from None
    if not isinstance(spec, dict) or "factory" not in spec:
        raise RunLoadError(f"{spec_path}: expected a JSON object with a 'factory' field")
    factory = _import_factory(str(spec["factory"]), spec_path)
    data = Path(data_dir) if data_dir is not None else _resolve_data_dir(run_dir, spec.get("data"))
    vocab, prep = load_vocab_and_options(run_dir, data, spec.get("prep_options"), spec_path)
    kwargs: dict[str, Any] = {"coarse_topk": coarse_topk or 1, "device": device}
    if checkpoint is not None:
        kwargs["checkpoint"] = checkpoint
    decoder = factory(run_dir, spec, **kwargs)
    info = {"format": DECODER_SPEC, "factory": spec["factory"], "checkpoint": checkpoint}
    return LoadedRun(decoder, vocab, prep, str(spec.get("model", "MODEL")), run_dir, data, info)


register_loader("decoder.json", _load_spec_run)


def load_run(
    run_dir: str | Path,
    *,
    checkpoint: str | None = None,
    coarse_topk: int | None = None,
    device: str = "cpu",
    data_dir: str | Path | None = None,
) -> LoadedRun:
    """Load ``run_dir`` with the first loader that recognises it.

    Args:
        run_dir: the run directory.
        checkpoint: a specific checkpoint (default: the loader's choice, e.g. the best).
        coarse_topk: chunks read per step at test time by hard-attention models
            (1 = argmax; k > 1 = +MULTI; None = the run's own setting).
        device: where the model is placed.
        data_dir: the prepared corpus, for runs that do not record it (vocabulary and
            preprocessing options are read from it).
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise RunLoadError(f"{path}: no such run directory")
    if coarse_topk is not None and coarse_topk < 1:
        raise RunLoadError(f"coarse_topk must be >= 1, got {coarse_topk}")
    for _, loader in LOADERS:
        loaded = loader(path, checkpoint=checkpoint, coarse_topk=coarse_topk, device=device, data_dir=data_dir)
        if loaded is not None:
            if coarse_topk is not None:
                loaded.info["coarse_topk"] = coarse_topk
            return loaded
    known = ", ".join(name for name, _ in LOADERS)
    raise RunLoadError(f"{path}: not a run directory of a known format (looked for: {known})")
