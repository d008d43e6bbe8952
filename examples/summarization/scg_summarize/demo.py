"""The demo: synthetic corpus -> small STANDARD and small C2F+MULTI2 -> results table + heatmap.

:func:`run_demo` needs nothing but CPU minutes: it generates the synthetic corpus (whose salient
chunk is known, so coarse-attention accuracy is measurable), trains each configuration within
its share of the time budget, evaluates the best checkpoints on the test split (perplexity,
ROUGE-1/2/L of greedy/beam decodes, coarse accuracy, attention entropy, fraction of words read)
and draws, for one test document, each model's attention over chunks at every decoder step.
Given ``data=``, it uses that prepared corpus instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .data import make_synthetic_corpus
from .models.decode import greedy_decode
from .models.summarizer import Summarizer
from .train.config import load_config
from .train.data import batch_to, load_split
from .train.evaluate import evaluate_nll, generate, rouge
from .train.loop import BEST, Trainer, load_model

__all__ = ["DEFAULT_CONFIGS", "draw_heatmap", "format_table", "run_demo"]

DEFAULT_CONFIGS: tuple[str, ...] = ("small-STANDARD", "small-C2F+MULTI2")

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


@torch.no_grad()
def chunk_attention(model: Summarizer, batch: dict[str, Any], max_len: int) -> tuple[torch.Tensor, list[int]]:
    """Greedy-decode the first example of ``batch``; returns its chunk weights ``(T, M)`` and tokens."""
    model.eval()
    decoded = greedy_decode(model, batch["src"][:1], batch["src_mask"][:1], max_len=max_len, record=True)
    steps = len(decoded.tokens[0]) + 1  # the words and </s>
    weights = torch.stack([a.chunk_weights[0] for a in decoded.attention[:steps]])  # (T, M)
    return weights.cpu(), decoded.tokens[0]


def draw_heatmap(panels: Sequence[tuple[str, torch.Tensor, list[str]]], salient: int, path: Path) -> None:
    """One panel per model: decoder steps (rows) x chunks (columns), the salient chunk outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.5), squeeze=False)
    for ax, (title, weights, words) in zip(axes[0], panels):
        image = ax.imshow(weights.numpy(), aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("chunk")
        ax.set_xticks(range(weights.shape[1]))
        ax.set_yticks(range(len(words)))
        ax.set_yticklabels(words, fontsize=7)
        if salient >= 0:
            ax.add_patch(plt.Rectangle((salient - 0.5, -0.5), 1, weights.shape[0], fill=False, edgecolor="red", lw=2))
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="attention on chunk")
    fig.suptitle("attention over chunks per decoder step (salient chunk in red)", fontsize=10)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def run_demo(out_dir: str | Path, *, data: str | Path | None = None, configs: Sequence[str] = DEFAULT_CONFIGS,
             budget_s: float = 240.0, overrides: Sequence[str] = (), n_train: int = 2000, n_eval: int = 200,
             seed: int = 0, quiet: bool = True, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run the demo; returns one result row per configuration (also written to ``out_dir``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if data is None:
        data = out / "data"
        if not (Path(data) / "meta.json").is_file():
            log(f"generating the synthetic corpus in {data} ({n_train} training documents)")
            make_synthetic_corpus(data, n_train=n_train, n_valid=n_eval, n_test=n_eval, seed=seed, overwrite=True)
    data = Path(data)
    rows: list[dict[str, Any]] = []
    panels: list[tuple[str, torch.Tensor, list[str]]] = []
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    per_model = budget_s / max(len(configs), 1)
    salient = -1
    for name in configs:
        config = load_config(name, [*overrides, f"train.time_budget_s={per_model * 0.8:.1f}"])
        run_dir = out / name
        log(f"training {name} (about {per_model:.0f}s) -> {run_dir}")
        start = time.perf_counter()
        trainer = Trainer(config, data, run_dir, quiet=quiet, log=log)
        trainer.fit()
        train_s = time.perf_counter() - start
        model, config = load_model(run_dir / BEST, device)
        test = load_split(data, config.data.test_split, config, with_text=True, vocab=trainer.vocab)
        row: dict[str, Any] = {"model": name, "train_s": train_s, "steps": trainer.step}
        row.update(evaluate_nll(model, test, config, device))
        hyps, refs = generate(model, test, config, device)
        row.update(rouge(hyps, refs))
        row["example"] = hyps[0] if hyps else ""
        rows.append(row)
        batch = batch_to(next(iter(_first_batch(test, config))), device, config)
        salient = int(batch["salient"][0])
        weights, tokens = chunk_attention(model, batch, config.eval.max_len)
        words = [test.vocab.id_to_token(i) for i in tokens] + ["</s>"]
        panels.append((name, weights[: len(words)], words))
        (run_dir / "test.hyp.txt").write_text("".join(h + "\n" for h in hyps))
    table = format_table(rows)
    heatmap = out / "heatmap.png"
    draw_heatmap(panels, salient, heatmap)
    (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "results.md").write_text(table + "\n")
    log(table)
    log(f"heatmap: {heatmap}")
    return rows


def _first_batch(dataset: Any, config: Any) -> Any:
    from .train.data import make_loader

    return make_loader(dataset, config, train=False, batch_size=1)
