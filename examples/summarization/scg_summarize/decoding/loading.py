"""A run directory of ``scg-summarize train`` as a step decoder with its vocabulary and preprocessing.

A run directory holds ``config.json`` (the run configuration), ``best.pt`` and/or ``checkpoint.pt``
(the configuration and the weights, read by `scg_summarize.models.load_model`), ``vocab.txt`` and
``data.json`` (the corpus it was trained on and its preprocessing options). Every model family
writes this one format, and [`load_run`][scg_summarize.decoding.loading.load_run] serves all of
them to decoding through the one step adapter
[`ModelStepDecoder`][scg_summarize.decoding.adapters.ModelStepDecoder].

Nothing in ``config.json`` is ignored: a key no run configuration has is refused naming the file
and the key (`config_problems`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.options import PrepOptions
from ..data.storage import META_FILE, VOCAB_FILE, read_meta
from ..data.vocab import Vocab
from ..decode_options import EVAL_TABLE_OTHER_KEYS, DecodeOptions, option_problems
from ..devices import checked_device
from ..jsonlines import json_object
from ..models.config import ModelConfig
from ..models.loading import CHECKPOINTS, CheckpointError, load_model, run_checkpoint
from ..typed import did_you_mean
from .adapters import ModelStepDecoder
from .inputs import SourceDocument, regrid_document

__all__ = [
    "CONFIG_FILE",
    "CONFIG_KEYS",
    "INPUT_OPTIONS",
    "LoadedRun",
    "RunLoadError",
    "config_problems",
    "input_mismatch",
    "load_run",
]

#: the run configuration the trainer writes
CONFIG_FILE = "config.json"
#: the trainer's record of the corpus (``data_dir``, ``prep_options``)
DATA_RECORD = "data.json"
#: The entries of a run's ``config.json``: the fields of ``train.config.Config``, which decoding
#: does not import (``test_layers``); ``test_decoding_cli`` keeps the two the same.
CONFIG_KEYS: tuple[str, ...] = ("name", "description", "model", "train", "data", "eval")

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


@dataclass(kw_only=True, slots=True)
class LoadedRun:
    """A model ready for decoding.

    Attributes:
        decoder: the model through the step protocol.
        vocab: the model's vocabulary.
        prep_options: how raw text must be preprocessed for this model.
        model: the model's name for tables (the configuration's: ``STANDARD``, ``C2F``, ...).
        family: the model family (``c2f``, ``paulus``, ``abs``, ``mal``).
        run_dir: the run directory.
        checkpoint: the checkpoint loaded.
        data_dir: the prepared corpus the run was trained on, when recorded.
        regrid: ``(M, N)`` when the model reads the source re-cut into another chunk grid
            (the trainer's ``data.regrid``); apply `prepare` to documents.
        run_options: the decoding settings of the run configuration's ``[eval]`` table, when it has
            one: the run's defaults for ``summarize``/``evaluate`` (read by
            [`DecodeOptions.from_eval_table`][scg_summarize.decode_options.DecodeOptions.from_eval_table]).
    """

    decoder: ModelStepDecoder
    vocab: Vocab
    prep_options: PrepOptions
    model: str
    family: str
    run_dir: Path
    checkpoint: Path
    data_dir: Path | None = None
    regrid: tuple[int, int] | None = None
    run_options: DecodeOptions | None = None

    @property
    def info(self) -> dict[str, str | int]:
        """What a result record keeps about the run (``run_info``): the checkpoint, the
        configuration's name, the family and the chunks read per step."""
        return {
            "checkpoint": str(self.checkpoint),
            "config": self.model,
            "family": self.family,
            "coarse_topk": self.decoder.coarse_topk,
        }

    def prepare(self, docs: Iterable[SourceDocument]) -> Iterator[SourceDocument]:
        """``docs`` in the chunk grid the model reads (re-cut when the run uses a regrid)."""
        for doc in docs:
            yield doc if self.regrid is None else regrid_document(doc, *self.regrid)


def _json(path: Path) -> dict[str, Any]:
    try:
        return json_object(path)
    except (OSError, ValueError) as err:  # names the file (a config.json cut short, edited by hand...)
        raise RunLoadError(str(err)) from None


def _data_record(run_dir: Path) -> dict[str, Any]:
    """``run_dir/data.json`` (empty when the run has none)."""
    record = run_dir / DATA_RECORD
    return _json(record) if record.is_file() else {}


def _data_dir_of(record: Mapping[str, Any]) -> Path | None:
    """The corpus named by ``data.json`` (the trainer records it there, not in ``config.json``)."""
    for key in ("data_dir", "data_path"):
        value = record.get(key)
        if value:
            return Path(str(value))
    return None


def config_problems(raw: Mapping[str, Any], stored: Mapping[str, Any], checkpoint: str) -> list[str]:
    """Every unknown key of a run's ``config.json`` (``raw``), one line each, with the known keys
    (and the closest one, when one is close): an entry that is not one of `CONFIG_KEYS`, a
    ``model`` option the family does not have, a ``train``/``data`` option the run's checkpoint
    does not record (``stored``: the configuration the trainer wrote with the weights, every
    option of its version, so a run of a newer version that adds an option is read), an
    ``[eval]`` option that is no search setting, and a table that is not a table. Nothing in
    ``config.json`` is ignored: a key edited in by hand (``"evl"``, ``train.bach_size``) was
    dropped without a word, and the run decoded with other settings than the user wrote."""
    problems: list[str] = []
    known = list(dict.fromkeys((*CONFIG_KEYS, *stored)))
    for key in raw:
        if key not in known:
            problems.append(
                f"{key}: not an entry of a run configuration{did_you_mean(key, known)} (known: {', '.join(known)})"
            )
    for table in ("model", "train", "data", "eval"):
        values = raw.get(table)
        if values is not None and not isinstance(values, dict):
            problems.append(f"{table}: expected a table of options, got {values!r}")
    model = raw.get("model")
    if isinstance(model, dict):
        try:
            ModelConfig.family_table(model)  # (its message lists the family's options)
        except ValueError as err:
            problems.append(str(err))
    for table in ("train", "data"):
        values, recorded = raw.get(table), stored.get(table)
        if isinstance(values, dict) and isinstance(recorded, dict):
            problems += [
                f"{table}.{key}: unknown option{did_you_mean(key, recorded)} "
                f"(known, as {checkpoint} records them: {', '.join(sorted(recorded))})"
                for key in values
                if key not in recorded
            ]
    search = raw.get("eval")
    if isinstance(search, dict):  # (its message lists the search settings)
        problems += option_problems(search, prefix="eval.", also_known=EVAL_TABLE_OTHER_KEYS)
    return problems


def _vocab_and_options(
    run_dir: Path, data_dir: Path | None, prep: Mapping[str, Any] | None
) -> tuple[Vocab, PrepOptions, Path]:
    """The vocabulary (the run's own ``vocab.txt`` or the data's), the preprocessing options
    (recorded in ``data.json``, or the data's ``meta.json``) and the vocabulary's file."""
    vocab_path = run_dir / VOCAB_FILE
    if not vocab_path.is_file() and data_dir is not None:
        vocab_path = data_dir / VOCAB_FILE
    if not vocab_path.is_file():
        hint = f"nor in {data_dir}" if data_dir is not None else "and no data directory is known: pass --data DIR"
        raise RunLoadError(f"{run_dir / VOCAB_FILE}: no such file ({hint})")
    if prep is None:
        if data_dir is None or not (data_dir / META_FILE).is_file():
            raise RunLoadError(
                f"{run_dir / DATA_RECORD}: no preprocessing options recorded, and no data directory with {META_FILE} "
                "(pass --data DIR)"
            )
        prep = read_meta(data_dir)["options"]
    try:
        return Vocab.load(vocab_path), PrepOptions.from_dict(dict(prep)), vocab_path
    except (ValueError, TypeError) as err:
        raise RunLoadError(f"{vocab_path}: {err}") from err


def load_run(
    run_dir: str | Path,
    *,
    checkpoint: str | Path | None = None,
    coarse_topk: int | None = None,
    device: str = "cpu",
    data_dir: str | Path | None = None,
) -> LoadedRun:
    """Load a run directory written by ``scg-summarize train`` (any model family).

    Args:
        run_dir: the run directory.
        checkpoint: a specific checkpoint file (default: ``best.pt``, else ``checkpoint.pt``).
        coarse_topk: chunks read per step at test time by hard-attention models
            (1 = argmax; k > 1 = +MULTI; None = the run's own ``model.test_k``).
        device: where the model is placed.
        data_dir: the prepared corpus, for runs that do not record it (vocabulary and
            preprocessing options are read from it).

    Raises:
        RunLoadError: naming the file: no such directory, no ``config.json``, no checkpoint, a
            corrupt or foreign one, or a vocabulary that does not fit the model.
    """
    if not isinstance(run_dir, (str, Path)):
        raise RunLoadError(f"load_run(run_dir): expected a path, got {type(run_dir).__name__}")
    try:
        checked_device(device, "load_run")
    except ValueError as err:  # (a missing GPU was blamed on the checkpoint)
        raise RunLoadError(str(err)) from None
    path = Path(run_dir)
    if not path.is_dir():
        raise RunLoadError(f"{path}: no such run directory")
    if coarse_topk is not None and coarse_topk < 1:
        raise RunLoadError(f"coarse_topk must be >= 1, got {coarse_topk}")
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise RunLoadError(
            f"{config_path}: no such file (a run directory of scg-summarize train holds {CONFIG_FILE}, "
            f"{' or '.join(CHECKPOINTS)} and {VOCAB_FILE})"
        )
    raw = _json(config_path)
    try:
        weights = run_checkpoint(path) if checkpoint is None else Path(checkpoint)
    except CheckpointError as err:
        raise RunLoadError(str(err)) from None
    record = _data_record(path)
    if data_dir is not None and not Path(data_dir).is_dir():  # (it would be recorded as the run's corpus)
        raise RunLoadError(f"load_run(data_dir={str(data_dir)!r}): no such directory")
    data = Path(data_dir) if data_dir is not None else _data_dir_of(record)
    prep = record.get("prep_options")
    vocab, options, vocab_path = _vocab_and_options(path, data, prep if isinstance(prep, dict) else None)
    try:
        model, stored = load_model(weights, device, vocab=(vocab, str(vocab_path)))
    except (CheckpointError, KeyError, RuntimeError, ValueError) as err:  # the message names the file
        message = str(err)
        raise RunLoadError(message if str(weights) in message else f"{weights}: {message}") from None
    if checkpoint is not None and Path(weights).resolve().parent != path.resolve():
        # (a checkpoint from elsewhere: the result is filed under this run, with its training record
        # and decoding defaults, so it must be this run's model)
        differs = [key for key in ("name", "model") if stored.get(key) != raw.get(key)]
        if differs:
            raise RunLoadError(
                f"{weights}: a checkpoint of another configuration than the run {path} "
                f"({stored.get('name')!r} against {raw.get('name')!r}; its {' and '.join(differs)} differ): "
                "the result would be filed under this run, with its training record and decoding defaults. "
                "Give --run the folder the checkpoint was trained in"
            )
    problems = config_problems(raw, stored, str(weights))
    if problems:
        raise RunLoadError("\n".join(f"{config_path}: {line}" for line in problems))
    size = int(stored["model"].get("vocab_size", 0))
    if len(vocab) != size:
        raise RunLoadError(f"{weights}: the model has {size} words, the vocabulary {vocab_path} {len(vocab)}")
    grid = (stored.get("data") or {}).get("regrid") or []
    table = raw.get("eval")
    try:
        run_options = DecodeOptions.from_eval_table(table) if isinstance(table, dict) else None
    except ValueError as err:
        raise RunLoadError(f"{config_path}: {err}") from None
    return LoadedRun(
        decoder=ModelStepDecoder(model, coarse_topk),
        vocab=vocab,
        prep_options=options,
        model=str(stored.get("name", "MODEL")),
        family=model.config.family,
        run_dir=path,
        checkpoint=weights,
        data_dir=data,
        regrid=(int(grid[0]), int(grid[1])) if grid else None,
        run_options=run_options,
    )
