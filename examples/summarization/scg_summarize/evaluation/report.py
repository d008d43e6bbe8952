"""Result files and tables: one JSON per evaluation, markdown in the layout of the paper.

Every ``evaluate`` or ``baseline`` run writes a *result* (`make_result`): a JSON object
with ``"schema": "scg-summarize-result"``, the row name (``C2F``, ``LEAD-3``...), the data and
split, and the ``metrics`` (``ppl``, ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum``,
``coarse_entropy``, ``fraction_read``, ``coarse_accuracy``...). `collect_results` finds
all results under a folder; `markdown_report` renders them like the paper's Table 1 --
baselines first, then the models in the paper's order, columns PPL and ROUGE-1/2/L (F1, x 100)
-- with ``n``, the examples scored (and a note when rows differ in it), followed by a Table
2-style block with the attention metrics of the models that attend over chunks (the ``c2f``
family; the other families attend over one flat sequence).
One table is made per (data, split).

No result is dropped: records are told apart by everything that makes them differ (model or
baseline name, run folder, data, split, decoding, ROUGE and baseline settings, checkpoint,
examples; `result_settings`). Only results with identical settings -- a re-run -- are
reduced to the newest (`select_results` says how many). Rows that share a name are
labelled with their run folder and, if that is not enough, with the settings that differ.
Results stored with ``warnings`` (a corpus prepared differently from the run's training data)
are marked with ``(!)`` and the warnings are listed under the table. A model whose training was
stopped by ``train.time_budget_s`` (``RUN_DIR/training.json``, stored in the result as
``training``) is marked ``(time budget)`` with a note: its numbers depend on the machine's load.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MODEL_ORDER",
    "RESULT_SCHEMA",
    "TRAINING_RECORD",
    "budget_note",
    "collect_results",
    "columns_table",
    "make_result",
    "markdown_report",
    "markdown_table",
    "read_result",
    "read_training_record",
    "result_settings",
    "select_results",
    "write_result",
]

RESULT_SCHEMA = "scg-summarize-result"
#: the file in a run folder that says what its training did (written by the trainer)
TRAINING_RECORD = "training.json"
RESULT_VERSION = 1
#: Row order of the models (the paper's Table 1); other names follow alphabetically.
MODEL_ORDER: tuple[str, ...] = ("STANDARD", "MODEL1", "HIER", "C2F", "C2F+MULTI")
BASELINE_ORDER: tuple[str, ...] = ("FIRST", "LEAD", "PREFIX", "TEXTRANK")
MAIN_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("ppl", "PPL", 2),
    ("rouge1", "ROUGE-1", 2),
    ("rouge2", "ROUGE-2", 2),
    ("rougeL", "ROUGE-L", 2),
    ("rougeLsum", "ROUGE-Lsum", 2),
)
ATTENTION_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("coarse_entropy", "Entropy", 3),
    ("fraction_read", "Read", 3),
    ("fraction_read_step", "Read/word", 3),
    ("coarse_accuracy", "Coarse acc.", 3),
)


def make_result(
    kind: str, name: str, metrics: Mapping[str, Any], *, data: str, split: str, examples: int, **details: Any
) -> dict[str, Any]:
    """A result record (``kind`` is ``"model"`` or ``"baseline"``); ``details`` are stored as-is
    (run directory, decoding and ROUGE options, timings)."""
    if kind not in ("model", "baseline"):
        raise ValueError(f"kind must be 'model' or 'baseline', got {kind!r}")
    return {
        "schema": RESULT_SCHEMA,
        "version": RESULT_VERSION,
        "kind": kind,
        "name": name,
        "data": data,
        "split": split,
        "examples": examples,
        "metrics": dict(metrics),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **details,
    }


def read_training_record(run_dir: str | Path) -> dict[str, Any] | None:
    """``RUN_DIR/training.json`` as a dict (None when the run has none or it is not JSON)."""
    try:
        record = json.loads((Path(run_dir) / TRAINING_RECORD).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def budget_note(training: Any) -> str | None:
    """One line when a run was stopped by ``train.time_budget_s`` (None otherwise)."""
    if not isinstance(training, dict) or training.get("stopped_by") != "time_budget_s":
        return None
    return (
        f"training stopped by train.time_budget_s={training.get('time_budget_s', 0):g} after "
        f"{training.get('steps', '?')} steps ({training.get('cpu_s', 0):.0f} CPU s): the result depends on "
        f"the machine's load; budget in train.epochs / train.max_steps_per_epoch to reproduce it"
    )


def write_result(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``result`` as indented JSON (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_result(path: str | Path) -> dict[str, Any] | None:
    """The result stored in ``path``, or None when the file is not a result (other JSON)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or record.get("schema") != RESULT_SCHEMA:
        return None
    if not isinstance(record.get("metrics"), dict) or "name" not in record:
        raise ValueError(f"{path}: a {RESULT_SCHEMA} file without 'name' and 'metrics'")
    record["_path"] = str(path)
    return record


def collect_results(root: str | Path, max_depth: int = 4) -> list[dict[str, Any]]:
    """All result files under ``root`` (at most ``max_depth`` folders deep), sorted by path."""
    root = Path(root)
    if root.is_file():
        raise ValueError(f"{root}: a file; report reads a folder of runs and result files (e.g. runs/)")
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    found: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*.json")):
        if len(path.relative_to(root).parts) > max_depth + 1:
            continue
        record = read_result(path)
        if record is not None:
            found.append(record)
    return found


def _row_key(record: Mapping[str, Any]) -> tuple[int, int, str]:
    name = str(record["name"])
    if record.get("kind") == "baseline":
        head = name.split("-")[0]
        rank = BASELINE_ORDER.index(head) if head in BASELINE_ORDER else len(BASELINE_ORDER)
        return (0, rank, name)
    base = name.split(" ")[0]
    for size in ("small-", "tiny-"):
        base = base.removeprefix(size)
    family = base if base in MODEL_ORDER else base.split("+")[0].split("-")[0]
    rank = MODEL_ORDER.index(family) if family in MODEL_ORDER else len(MODEL_ORDER)
    return (1, rank, name)


def result_settings(record: Mapping[str, Any]) -> dict[str, Any]:
    """What tells two results apart: the kind, name, run, data, split, number of examples,
    decoding (without the recorded ``extras``), ROUGE and baseline settings, the checkpoint and
    coarse top-k. Two results with equal settings are the same evaluation run twice."""
    decode = dict(record.get("decode_options") or {})
    decode.pop("extras", None)
    info = record.get("run_info") or {}
    return {
        "kind": record.get("kind"),
        "name": record.get("name"),
        "run": record.get("run"),
        "data": record.get("data"),
        "split": record.get("split"),
        "examples": record.get("examples"),
        "decode_options": decode,
        "rouge_options": record.get("rouge_options"),
        "baseline": record.get("baseline"),
        "checkpoint": info.get("checkpoint") if isinstance(info, Mapping) else None,
        "coarse_topk": info.get("coarse_topk") if isinstance(info, Mapping) else None,
    }


def _settings_key(record: Mapping[str, Any]) -> str:
    return json.dumps(result_settings(record), sort_keys=True, default=str)


def select_results(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept, superseded)``: one record per distinct `result_settings`, the newest;
    ``superseded`` are the older copies of identical evaluations."""
    best: dict[str, dict[str, Any]] = {}
    superseded: list[dict[str, Any]] = []
    for record in records:
        key = _settings_key(record)
        if key not in best:
            best[key] = record
        elif str(record.get("created", "")) >= str(best[key].get("created", "")):
            superseded.append(best[key])
            best[key] = record
        else:
            superseded.append(record)
    return list(best.values()), superseded


def _flat_settings(record: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in result_settings(record).items():
        if isinstance(value, Mapping):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        elif key not in ("kind", "name", "run", "data", "split"):
            flat[key] = value
    return flat


_SHORT = {
    "decode_options.beam_size": "beam",
    "decode_options.max_len": "max",
    "decode_options.min_len": "min",
    "decode_options.no_repeat_ngram": "ngram",
    "decode_options.unk": "unk",
    "rouge_options.refs": "refs",
    "decode_options.greedy": "greedy",
    "rouge_options.measure": "measure",
    "baseline.param": "k",
}


def _label_rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Row labels; rows that share a name are told apart by their run folder, then by the
    settings that differ between them."""
    names = [str(r["name"]) for r in records]
    labels = []
    for record, name in zip(records, names):
        runs = {str(r.get("run", "")) for r, other in zip(records, names) if other == name}
        if len(runs) > 1 and record.get("run"):
            name = f"{name} ({Path(str(record['run'])).name})"
        labels.append(name)
    out = []
    for record, label in zip(records, labels):
        twins = [r for r, other in zip(records, labels) if other == label]
        if len(twins) > 1:
            mine, flats = _flat_settings(record), [_flat_settings(r) for r in twins]
            differ = [k for k in mine if any(f.get(k) != mine[k] for f in flats)]
            label += " [" + ", ".join(f"{_SHORT.get(k, k.split('.')[-1])}={mine[k]}" for k in differ) + "]"
        if record.get("warnings"):
            label += " (!)"
        if budget_note(record.get("training")):
            label += " (time budget)"
        out.append((label, record))
    return out


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, _Text):
        return str(value)
    if isinstance(value, float) and value == float("inf"):
        return "inf"
    return f"{float(value):.{digits}f}"


def markdown_table(rows: Iterable[tuple[str, Mapping[str, Any]]], columns: Sequence[tuple[str, str, int]]) -> str:
    """A markdown table: one row per ``(label, metrics)``, one column per ``(key, header,
    decimals)``; missing values are shown as ``–``."""
    lines = ["| Model | " + " | ".join(h for _, h, _ in columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for label, metrics in rows:
        cells = [_fmt(metrics.get(key), digits) for key, _, digits in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _lookup(record: Mapping[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def columns_table(records: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """One markdown table of ``records`` (all data sets, rows in the paper's order) with the
    columns asked for: ``PATH[:DECIMALS]``, a dotted path into the result record, e.g.
    ``metrics.rouge1:2`` or ``training.steps:0`` (the training record of the run: steps,
    ``valid_ppl``, ``cpu_s``, ``stopped_by``...). What ``report --columns`` prints and what the
    generated tables of ``docs/results.md`` are."""
    specs: list[tuple[str, str, int]] = []
    for column in columns:
        path, _, digits = column.partition(":")
        if not path or (digits and not digits.isdigit()):
            raise ValueError(f"--columns: {column!r} is not PATH or PATH:DECIMALS (e.g. metrics.rouge1:2)")
        specs.append((path, path, int(digits) if digits else 2))
    kept, _ = select_results(records)
    kept.sort(key=lambda r: (str(r.get("data")), str(r.get("split")), _row_key(r)))
    rows = []
    unknown = [path for path, _, _ in specs if all(_lookup(r, path) is None for r in kept)]
    if unknown:  # (a misspelt path was a column of dashes)
        raise ValueError(
            f"--columns: no result has {', '.join(map(repr, unknown))} (paths look like metrics.rouge1, "
            f"training.steps; the results' top-level keys: {', '.join(sorted({k for r in kept for k in r}))})"
        )
    for label, record in _label_rows(kept):
        values = {path: _lookup(record, path) for path, _, _ in specs}
        numeric = {k: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for k, v in values.items()}
        rows.append((label, {k: v if numeric[k] else _Text(v) for k, v in values.items()}))
    return markdown_table(rows, specs)


class _Text(str):
    """A non-numeric cell (shown as it is)."""


def _group_names(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Data path -> the name shown: the folder name, or the whole path where two corpora share
    a folder name."""
    paths = sorted({str(r.get("data", "?")) for r in records})
    names = {p: Path(p).name for p in paths}
    return {p: (p if list(names.values()).count(names[p]) > 1 else names[p]) for p in paths}


def _chunk_level(record: Mapping[str, Any]) -> bool:
    """Whether the record's chunk-level attention metrics mean something: a baseline or a model
    of the ``c2f`` family (STANDARD's word attention summed per chunk included); the other
    families (Paulus, ABS, MAL) attend over one flat sequence, so they are left out of that block."""
    info = record.get("run_info")
    return not isinstance(info, Mapping) or str(info.get("family", "c2f")) == "c2f"


def markdown_report(records: Sequence[dict[str, Any]], title: str = "Results") -> str:
    """Markdown for ``records`` (see the module docstring); one section per (data, split)."""
    if not records:
        return f"# {title}\n\nNo results found.\n"
    kept, _ = select_results(records)
    data_names = _group_names(kept)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for kept_record in kept:
        key = (data_names[str(kept_record.get("data", "?"))], str(kept_record.get("split", "?")))
        groups.setdefault(key, []).append(kept_record)
    parts = [f"# {title}", ""]
    for (data, split), group in sorted(groups.items()):
        group.sort(key=_row_key)
        labelled = _label_rows(group)
        rows = [(label, {**r["metrics"], "n": r.get("examples")}) for label, r in labelled]
        parts += [f"## {data} / {split}", "", "ROUGE F1 (x 100), max over references; n: examples scored.", ""]
        parts += [markdown_table(rows, (("n", "n", 0), *MAIN_COLUMNS)), ""]
        sizes = sorted({int(r["examples"]) for _, r in labelled if isinstance(r.get("examples"), int)})
        if len(sizes) > 1:
            parts += [
                f"Note: these rows are scored on different examples (n = {', '.join(map(str, sizes))}; "
                "`--limit N` scores the first N examples of the split in its stored order, not a sample): "
                "compare rows of equal n, or two systems on their shared examples with `scg-summarize "
                "compare`.",
                "",
            ]
        attention = [
            (label, r["metrics"])
            for label, r in labelled
            if _chunk_level(r) and any(r["metrics"].get(k) is not None for k, _, _ in ATTENTION_COLUMNS)
        ]
        if attention:
            parts += [
                "Coarse attention: entropy (nats) per generated word, fraction of source words read "
                "(chunks read at any step of a summary, and per generated word), coarse accuracy "
                "(synthetic data).",
                "",
            ]
            parts += [markdown_table(attention, ATTENTION_COLUMNS), ""]
        for label, record in labelled:
            note = budget_note(record.get("training"))
            if note:
                parts.append(f"{label}: {note}.")
        if any(budget_note(r.get("training")) for _, r in labelled):
            parts.append("")
        for label, record in labelled:
            unk, tokens = record["metrics"].get("ppl_unk_scored"), record["metrics"].get("ppl_tokens")
            if unk:
                parts.append(
                    f"{label}: PPL scores {unk} of {tokens} reference tokens as <unk> (outside the "
                    "output vocabulary and the source, as in training)."
                )
        if any(r["metrics"].get("ppl_unk_scored") for _, r in labelled):
            parts.append("")
        for label, record in labelled:
            for warning in record.get("warnings") or []:
                parts.append(f"(!) {label}: {warning}")
        if any(r.get("warnings") for _, r in labelled):
            parts.append("")
    return "\n".join(parts)
