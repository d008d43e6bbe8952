"""The demo: synthetic corpus -> small STANDARD and small C2F+MULTI2 -> results table + heatmap.

[`run_demo`][scg_summarize.demo.run_demo] needs nothing but a few CPU minutes: it generates the synthetic corpus (whose
salient chunk is known, so coarse-attention accuracy is measurable), trains each configuration
for a fixed number of steps (seeded, on one thread: the table is the same on any machine, however
busy), evaluates the best checkpoints on the test split (perplexity, ROUGE-1/2/L of the decoded
summaries, coarse accuracy, attention entropy, fraction of words read; all from
`scg_summarize.evaluation.evaluate_model`) and draws, for one test document, each model's
attention over chunks at every decoder step. The CPU and wall-clock seconds of every phase are
reported beside the table (they are the only numbers that depend on the machine), and a model
that has not left the uniform-attention plateau is flagged with a warning. Given ``data=``, it
uses that prepared corpus instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .data import SummarizationDataset, make_synthetic_corpus
from .decode_options import DecodeOptions
from .evaluation.runs import evaluate_run
from .train.config import Config
from .train.config_loading import load_config
from .train.loop import Trainer

__all__ = [
    "DEFAULT_CONFIGS",
    "DEFAULT_STEPS",
    "DEMO_EVAL",
    "DEMO_SIZES",
    "DEMO_TRAIN",
    "RUN_FILES",
    "draw_heatmap",
    "format_table",
    "format_timings",
    "plateau_warning",
    "run_demo",
]

DEFAULT_CONFIGS: tuple[str, ...] = ("small-STANDARD+COPY", "small-C2F+MULTI2+COPY")
#: Training steps (minibatches of 32 documents) per model, and steps between validations (each
#: validation may write ``best.pt``).
DEFAULT_STEPS = 450
VALID_EVERY = 150
#: The demo's sizes for the ``small-`` configurations (docs/results.md, section 1): half the
#: ``small-`` widths and a higher learning rate (a copying generator learns this corpus within a
#: few hundred steps).
DEMO_SIZES: tuple[str, ...] = ("model.emb_dim=32", "model.hidden=64", "model.conv_filters=32", "train.lr=0.005")
#: The demo's schedule for every configuration: a fixed number of steps instead of a time budget,
#: on one thread (reproducible to the digit on any machine).
DEMO_TRAIN: tuple[str, ...] = ("train.time_budget_s=0", "train.threads=1", "train.checkpoint_every=0")
#: The demo's decoding, set in each run's ``[eval]`` table (so that ``scg-summarize evaluate --run
#: OUT/NAME`` decodes the same way; ``--set eval.KEY=VALUE`` overrides it): greedy, at most 30
#: words, no blocking, ``<unk>`` forbidden. The synthetic summaries are 6-15 made-up words, so the
#: defaults for real text (10-40 words) do not apply.
DEMO_EVAL: tuple[str, ...] = (
    "eval.greedy=true",
    "eval.max_len=30",
    "eval.min_len=0",
    "eval.no_repeat_ngram=0",
    "eval.unk=forbid",
)
#: What makes a folder a training run (the demo never trains into one without ``overwrite``).
RUN_FILES: tuple[str, ...] = ("config.json", "checkpoint.pt", "best.pt", "metrics.jsonl")

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", "{}"),
    ("steps", "steps", "{:,}"),
    ("ppl", "PPL", "{:.2f}"),
    ("rouge1", "R-1", "{:.1f}"),
    ("rouge2", "R-2", "{:.1f}"),
    ("rougeL", "R-L", "{:.1f}"),
    ("coarse_acc", "coarse acc", "{:.1%}"),
    ("attn_entropy", "H(chunks)", "{:.2f}"),
    ("read_frac", "words read", "{:.1%}"),
)
TIMING_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", "{}"),
    ("steps", "steps", "{:,}"),
    ("train_cpu_s", "train CPU s", "{:.0f}"),
    ("train_s", "train wall s", "{:.0f}"),
    ("eval_cpu_s", "eval CPU s", "{:.1f}"),
    ("eval_s", "eval wall s", "{:.1f}"),
)


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(title for _, title, _ in columns) + " |"
    rule = "|" + "|".join("---" if key == "model" else "---:" for key, _, _ in columns) + "|"
    lines = [head, rule]
    for row in rows:
        cells = ["n/a" if row.get(key) is None else fmt.format(row[key]) for key, _, fmt in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of the demo's results (the same on every machine)."""
    return _table(rows, COLUMNS)


def format_timings(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of the CPU and wall-clock seconds (these depend on the machine)."""
    return _table(rows, TIMING_COLUMNS)


def plateau_warning(row: dict[str, Any], run_dir: Path) -> str | None:
    """A warning when the model has not left the uniform-attention plateau: on the synthetic
    corpus, coarse accuracy below 50% (chance is 1/M); on any corpus, a test perplexity not ten
    times below the perplexity of its first training steps. None when it has learned."""
    if row.get("coarse_acc") is not None and row["coarse_acc"] < 0.5:
        return (
            f"{row['model']} has not found the salient chunk (coarse accuracy {row['coarse_acc']:.1%}; chance "
            f"is about 1/M): it has not left the uniform-attention plateau after {row['steps']} steps; its row "
            f"does not show what the model can do (train longer: --steps {2 * row['steps']})"
        )
    first = None
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("event") == "train":
                first = float(record["ppl"])
                break
    if first is not None and not row["ppl"] < first / 10:
        return (
            f"{row['model']}: test perplexity {row['ppl']:.1f} is not far below the {first:.1f} of its first "
            f"steps: it has not left its plateau after {row['steps']} steps (train longer: --steps "
            f"{2 * row['steps']})"
        )
    return None


def chunk_attention(run_dir: Path, data: Path, index: int = 0) -> tuple[torch.Tensor, list[str], int]:
    """Greedy-decode test document ``index`` with the shared decoder; returns the coarse attention
    ``(steps, M)`` (the words, then ``</s>``), the step labels and the salient chunk."""
    from .decoding import Summarizer, documents_from_split, load_run
    from .decoding.protocol import offered_extras

    run = load_run(run_dir, data_dir=data)
    dataset = SummarizationDataset(data, "test", vocab=run.vocab)
    doc = next(iter(run.prepare(documents_from_split(dataset, [index]))))
    wanted = offered_extras(run.decoder, ("coarse_attn", "chunk_read"))
    options = (run.run_options or DecodeOptions()).updated({"extras": wanted})
    summary = Summarizer(run.decoder, run.vocab, options).summarize_batch([doc])[0][0]
    weights = summary.extras["coarse_attn"].float().cpu()
    return weights, [*summary.tokens, "</s>"][: weights.shape[0]], doc.salient


def draw_heatmap(panels: Sequence[tuple[str, torch.Tensor, list[str]]], salient: int, path: Path) -> None:
    """One panel per model: decoder steps (rows) x chunks (columns), the salient chunk outlined.

    The margins are set in inches from the widths of the texts (the words of each panel's rows,
    the titles) as the saving renderer sets them, without drawing: the figure is drawn once, when
    saved (``bbox_inches="tight"`` draws it twice, once to find the extent and once to save)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from matplotlib.text import Text

    dpi = 120
    fig = Figure(dpi=dpi)  # no pyplot (no figure manager, the caller's backend untouched); its size is set below
    FigureCanvasAgg(fig)  # the saving canvas: texts are measured as it sets them (hinted: ~5 % above the outlines)

    def width_in(text: str, size: float) -> float:
        label = Text(text=text, fontsize=size, parse_math=False)
        label.set_figure(fig)
        return float(label.get_window_extent().width) / dpi

    suptitle = "attention over chunks per decoder step (salient chunk in red)"
    rows = max(weights.shape[0] for _, weights, _ in panels)
    # inches: each panel's left margin fits its widest row word (7 pt) beside the ticks; the axes are at least
    # 3 in wide (and as wide as their title) and 0.13 in a row; the colorbar, its ticks and label on the right
    lefts = [max((width_in(w, 7) for w in words), default=0.0) + 0.25 for _, _, words in panels]
    axes_w = max(3.0, *(width_in(title, 10) + 0.1 for title, _, _ in panels))
    axes_h = max(3.2, 0.13 * rows)
    bottom, top, right = 0.6, 0.65, 1.2
    width = max(sum(lefts) + len(panels) * axes_w + right, width_in(suptitle, 10) + 0.4)
    height = bottom + axes_h + top
    fig.set_size_inches(width, height)
    x = 0.0
    for left, (title, weights, words) in zip(lefts, panels):
        x += left
        ax = fig.add_axes((x / width, bottom / height, axes_w / width, axes_h / height))
        x += axes_w
        image = ax.imshow(weights.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("chunk")
        ax.set_xticks(range(weights.shape[1]))
        ax.set_yticks(range(len(words)))
        ax.set_yticklabels(words, fontsize=7, parse_math=False)  # a word is text, as measured above
        if salient >= 0:
            ax.add_patch(Rectangle((salient - 0.5, -0.5), 1, weights.shape[0], fill=False, edgecolor="red", lw=2))
    bar = fig.add_axes(((x + 0.3) / width, (bottom + 0.1 * axes_h) / height, 0.15 / width, 0.8 * axes_h / height))
    fig.colorbar(image, cax=bar, label="attention on chunk")
    fig.suptitle(suptitle, fontsize=10, y=1 - 0.1 / height, va="top")
    fig.savefig(path, dpi=dpi)


def schedule(steps: int) -> tuple[int, int]:
    """``(epochs, steps per epoch)`` for ``steps`` training steps, validating every
    `VALID_EVERY` steps (``steps`` must be a multiple of it when larger)."""
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    per_epoch = min(steps, VALID_EVERY)
    if steps % per_epoch:
        raise ValueError(
            f"steps must be a multiple of {VALID_EVERY} (validation and best.pt every {VALID_EVERY} steps), got {steps}"
        )
    return steps // per_epoch, per_epoch


def check_out(out: Path, configs: Sequence[str], overwrite: bool) -> None:
    """Refuse (``FileExistsError``) to train into ``out`` when it holds a demo's results or a run
    in ``out/CONFIG`` unless ``overwrite``; with it, remove those runs' files first."""
    from .commands._train_checks import check_run_folder

    held = [f"the results of a demo ({out / 'results.md'})"] if (out / "results.json").is_file() else []
    held += [f"a run in {out / name}" for name in configs if any((out / name / f).exists() for f in RUN_FILES)]
    if held and not overwrite:
        raise FileExistsError(
            f"{out} already holds {', '.join(held)}; pass --overwrite to train again there (those "
            f"runs are replaced), or choose another --out"
        )
    for name in configs:
        if (out / name).is_dir():
            check_run_folder(out / name, resume=False, overwrite=True)


def run_demo(
    out_dir: str | Path,
    *,
    data: str | Path | None = None,
    configs: Sequence[str] = DEFAULT_CONFIGS,
    steps: int = DEFAULT_STEPS,
    overrides: Sequence[str] = (),
    n_train: int = 10000,
    n_eval: int = 200,
    seed: int = 0,
    overwrite: bool = False,
    quiet: bool = True,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run the demo; returns one result row per configuration (also written to ``out_dir``).

    Args:
        out_dir: where the corpus, the runs, ``results.{md,json}``, ``timings.md`` and
            ``heatmap.png`` go.
        data: a prepared corpus instead of the generated synthetic one.
        configs: the configurations to train and compare.
        steps: training steps per configuration (a multiple of 150 above 150).
        overrides: ``TABLE.KEY=VALUE`` overrides applied to every configuration (after the
            demo's `DEMO_SIZES` (``small-`` configurations), `DEMO_TRAIN` and
            `DEMO_EVAL` settings).
        n_train / n_eval: synthetic training / validation and test documents.
        overwrite: train again over the runs of an earlier demo in ``out_dir``.
    """
    out = Path(out_dir)
    epochs, per_epoch = schedule(steps)
    # every configuration and the corpus before any work: a misspelt second name or --set key was
    # found after the corpus was generated and the first model trained (or, with --overwrite, its
    # earlier run deleted)
    loaded: dict[str, Config] = {}
    for name in configs:
        sizes = DEMO_SIZES if name.startswith("small-") else ()
        schedule_options = [f"train.epochs={epochs}", f"train.max_steps_per_epoch={per_epoch}"]
        loaded[name] = load_config(name, [*sizes, *DEMO_TRAIN, *schedule_options, *DEMO_EVAL, *overrides])
    if data is not None and not (Path(data) / "meta.json").is_file():
        found = "no such directory" if not Path(data).exists() else "not a prepared corpus (no meta.json)"
        raise ValueError(f"{data}: {found}; expected a corpus written by scg-summarize prepare")
    check_out(out, configs, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = out / "data"
        if not (Path(data) / "meta.json").is_file():
            log(f"generating the synthetic corpus in {data} ({n_train} training documents)")
            make_synthetic_corpus(data, n_train=n_train, n_valid=n_eval, n_test=n_eval, seed=seed, overwrite=True)
    data = Path(data)
    rows: list[dict[str, Any]] = []
    panels: list[tuple[str, torch.Tensor, list[str]]] = []
    warnings: list[str] = []
    salient = -1
    for name, config in loaded.items():
        run_dir = out / name
        log(f"training {name} for {epochs * per_epoch} steps -> {run_dir}")
        wall, cpu = time.perf_counter(), time.process_time()
        trainer = Trainer(config, data, run_dir, quiet=quiet, log=log)
        trainer.fit()
        trainer.close()
        train_s, train_cpu_s = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        result, outputs = evaluate_run(run_dir, data)
        metrics = result["metrics"]
        row = {
            "model": name,
            "steps": trainer.counters.step,
            "ppl": metrics["ppl"],
            "rouge1": metrics["rouge1"],
            "rouge2": metrics["rouge2"],
            "rougeL": metrics["rougeL"],
            "coarse_acc": metrics.get("coarse_accuracy"),
            "attn_entropy": metrics.get("coarse_entropy"),
            "read_frac": metrics.get("fraction_read"),
            "example": outputs[0]["summary"] if outputs else "",
        }
        weights, words, salient = chunk_attention(run_dir, data)
        row.update(
            train_s=train_s,
            train_cpu_s=train_cpu_s,
            eval_s=time.perf_counter() - wall,
            eval_cpu_s=time.process_time() - cpu,
        )
        warning = plateau_warning(row, run_dir)
        if warning is not None:
            warnings.append(warning)
        row["warning"] = warning
        rows.append(row)
        panels.append((name, weights, words))
    table = format_table(rows)
    timings = format_timings(rows)
    heatmap = out / "heatmap.png"
    draw_heatmap(panels, salient, heatmap)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    # (the table depends on torch's version and the CPU's vector instructions, which change the
    # order of floating-point sums in torch's kernels; not on the load or the environment's threads)
    made = f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, 1 thread"
    (out / "results.md").write_text(table + f"\n\n({made})\n" + "".join(f"\nWARNING: {w}\n" for w in warnings))
    (out / "timings.md").write_text(timings + "\n")
    log(table)
    log(f"({made}: the table depends on these, not on the machine's load)")
    log("")
    log(f"seconds (these depend on the machine and its load: {torch.get_num_threads()} thread):")
    log(timings)
    for warning in warnings:
        log(f"WARNING: {warning}")
    log(f"heatmap: {heatmap}")
    return rows
