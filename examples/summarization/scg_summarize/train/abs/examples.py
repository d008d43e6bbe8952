"""ABS's (input, title) pairs of a prepared split as flat id lists (Rush, Chopra & Weston 2015).

ABS reads its input as one sentence: every example's chunk grid is flattened
(`scg_summarize.data.chunking.pack_words`). These lists serve the count-based rows
(KN 5-gram, IR, Ext. %) and the decoding variants of the paper's tables; training reads batches
through the one trainer (``scg-summarize train --config ABS``, :mod:`scg_summarize.train.loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ...data.chunking import pack_words
from ...data.dataset import SummarizationDataset

__all__ = ["FlatPair", "example_tensors", "load_examples"]


@dataclass(kw_only=True, slots=True)
class FlatPair:
    """One pair as corpus ids: the flattened input and ``<s> title </s>``."""

    src: list[int]
    tgt: list[int]


def load_examples(root: str | Path, split: str) -> tuple[list[FlatPair], SummarizationDataset]:
    """Every example of a prepared split, inputs flattened to one sentence, and the split."""
    data = SummarizationDataset(root, split, with_text=True)
    out = []
    for i in range(len(data)):
        item = data[i]
        words, mask, _ = pack_words(item.src.unsqueeze(0), item.src_mask.unsqueeze(0))
        src = words[0][mask[0]].tolist()
        if not src:
            raise ValueError(f"{root}: {split} example {i} ({item.id}) has an empty input")
        out.append(FlatPair(src=src, tgt=[int(w) for w in data.target_ids(i)]))
    return out, data


def example_tensors(
    examples: Sequence[FlatPair], index: Sequence[int], device: torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inputs ``(B, L)``, their mask and the titles ``(B, T)`` of ``examples[index]`` (0-padded)."""
    chosen = [examples[i] for i in index]
    src = torch.zeros(len(chosen), max(len(e.src) for e in chosen), dtype=torch.long)
    tgt = torch.zeros(len(chosen), max(len(e.tgt) for e in chosen), dtype=torch.long)
    for b, e in enumerate(chosen):
        src[b, : len(e.src)] = torch.tensor(e.src)
        tgt[b, : len(e.tgt)] = torch.tensor(e.tgt)
    if device is not None and device.type != "cpu":
        src, tgt = src.to(device, non_blocking=True), tgt.to(device, non_blocking=True)
    return src, src != 0, tgt
