"""The demo: synthetic corpus -> small STANDARD and small C2F+MULTI2 -> results table + heatmap.

:func:`run_demo` needs nothing but CPU minutes: it generates the synthetic corpus (whose salient
chunk is known, so coarse-attention accuracy is measurable), trains each configuration within
its share of the time budget, evaluates the best checkpoints on the test split (perplexity,
ROUGE-1/2/L of the decoded summaries, coarse accuracy, attention entropy, fraction of words
read; all from :func:`scg_summarize.evaluation.evaluate_model`) and draws, for one test
document, each model's attention over chunks at every decoder step. Given ``data=``, it uses
that prepared corpus instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .data import SummarizationDataset, make_synthetic_corpus
from .decoding.options import resolve_decode_options
from .evaluation.runs import evaluate_run
from .train.config import load_config
from .train.loop import Trainer

__all__ = ["DEFAULT_CONFIGS", "DEMO_EVAL", "draw_heatmap", "format_table", "run_demo"]

DEFAULT_CONFIGS: tuple[str, ...] = ("small-STANDARD", "small-C2F+MULTI2")
#: The demo's decoding (docs/results.md, section 1), set in each run's ``[eval]`` table (so that
#: ``scg-summarize evaluate --run OUT/NAME`` decodes the same way; ``--set eval.KEY=VALUE``
#: overrides it): greedy, at most 30 words, no blocking, ``<unk>`` forbidden. The synthetic
#: summaries are 6-15 made-up words, so the defaults for real text (10-40 words) do not apply.
DEMO_EVAL: tuple[str, ...] = ("eval.beam=1", "eval.max_len=30", "eval.min_len=0", "eval.block_ngram=0",
                              "eval.unk=forbid")

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("model", "model", "{}"),
    ("ppl", "PPL", "{:.2f}"),
    ("rouge1", "R-1", "{:.1f}"),
    ("rouge2", "R-2", "{:.1f}"),
    ("rougeL", "R-L", "{:.1f}"),
    ("coarse_acc", "coarse acc", "{:.1%}"),
    ("attn_entropy", "H(chunks)", "{:.2f}"),
    ("read_frac", "words read", "{:.1%}"),
    ("train_s", "train s", "{:.0f}"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of the demo's results."""
    head = "| " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if key == "model" else "---:" for key, _, _ in COLUMNS) + "|"
    lines = [head, rule]
    for row in rows:
        cells = []
        for key, _, fmt in COLUMNS:
            value = row.get(key)
            cells.append("n/a" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chunk_attention(run_dir: Path, data: Path, index: int = 0) -> tuple[torch.Tensor, list[str], int]:
    """Greedy-decode test document ``index`` with the shared decoder; returns the coarse attention
    ``(steps, M)`` (the words, then ``</s>``), the step labels and the salient chunk."""
    from .decoding import Summarizer, documents_from_split, load_run

    run = load_run(run_dir, data_dir=data)
    dataset = SummarizationDataset(data, "test", vocab=run.vocab)
    doc = next(iter(run.prepare(documents_from_split(dataset, [index]))))
    options, _ = resolve_decode_options({}, run.eval_table, extras=("coarse_attn", "chunk_read"))
    summary = Summarizer(run.decoder, run.vocab, options).summarize_batch([doc])[0][0]
    weights = summary.extras["coarse_attn"].float().cpu()
    return weights, [*summary.tokens, "</s>"][: weights.shape[0]], doc.salient


def draw_heatmap(panels: Sequence[tuple[str, torch.Tensor, list[str]]], salient: int, path: Path) -> None:
    """One panel per model: decoder steps (rows) x chunks (columns), the salient chunk outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels), 4.5), squeeze=False)
    fig.subplots_adjust(wspace=0.45)
    for ax, (title, weights, words) in zip(axes[0], panels):
        image = ax.imshow(weights.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("chunk")
        ax.set_xticks(range(weights.shape[1]))
        ax.set_yticks(range(len(words)))
        ax.set_yticklabels(words, fontsize=7)
        if salient >= 0:
            ax.add_patch(Rectangle((salient - 0.5, -0.5), 1, weights.shape[0], fill=False, edgecolor="red", lw=2))
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="attention on chunk")
    fig.suptitle("attention over chunks per decoder step (salient chunk in red)", fontsize=10)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def run_demo(out_dir: str | Path, *, data: str | Path | None = None, configs: Sequence[str] = DEFAULT_CONFIGS,
             budget_s: float = 480.0, shares: Sequence[float] | None = None, overrides: Sequence[str] = (),
             n_train: int = 20000, n_eval: int = 200, seed: int = 0, quiet: bool = True,
             log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run the demo; returns one result row per configuration (also written to ``out_dir``).

    Args:
        out_dir: where the corpus, the runs, ``results.{md,json}`` and ``heatmap.png`` go.
        data: a prepared corpus instead of the generated synthetic one.
        configs: the configurations to train and compare.
        budget_s: training seconds for all configurations together.
        shares: each configuration's fraction of the budget (default: the hard-attention model
            gets 60% when the two default configurations are compared, else equal shares).
        overrides: ``TABLE.KEY=VALUE`` overrides applied to every configuration.
        n_train / n_eval: synthetic training / validation and test documents.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = out / "data"
        if not (Path(data) / "meta.json").is_file():
            log(f"generating the synthetic corpus in {data} ({n_train} training documents)")
            make_synthetic_corpus(data, n_train=n_train, n_valid=n_eval, n_test=n_eval, seed=seed, overwrite=True)
    data = Path(data)
    if shares is None:
        shares = (0.4, 0.6) if tuple(configs) == DEFAULT_CONFIGS else [1.0 / len(configs)] * len(configs)
    rows: list[dict[str, Any]] = []
    panels: list[tuple[str, torch.Tensor, list[str]]] = []
    salient = -1
    for name, share in zip(configs, shares):
        seconds = budget_s * share
        config = load_config(name, [*DEMO_EVAL, *overrides, f"train.time_budget_s={seconds:.1f}"])
        run_dir = out / name
        log(f"training {name} for at most {seconds:.0f}s -> {run_dir}")
        start = time.perf_counter()
        trainer = Trainer(config, data, run_dir, quiet=quiet, log=log)
        trainer.fit()
        train_s = time.perf_counter() - start
        result, outputs = evaluate_run(run_dir, data)
        metrics = result["metrics"]
        rows.append({"model": name, "train_s": train_s, "steps": trainer.step, "ppl": metrics["ppl"],
                     "rouge1": metrics["rouge1"], "rouge2": metrics["rouge2"], "rougeL": metrics["rougeL"],
                     "coarse_acc": metrics.get("coarse_accuracy"), "attn_entropy": metrics.get("coarse_entropy"),
                     "read_frac": metrics.get("fraction_read"), "example": outputs[0]["summary"] if outputs else ""})
        weights, words, salient = chunk_attention(run_dir, data)
        panels.append((name, weights, words))
    table = format_table(rows)
    heatmap = out / "heatmap.png"
    draw_heatmap(panels, salient, heatmap)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "results.md").write_text(table + "\n")
    log(table)
    log(f"heatmap: {heatmap}")
    return rows
