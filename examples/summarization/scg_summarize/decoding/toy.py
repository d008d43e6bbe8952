"""Tiny step decoders for tests, examples and the command line's smoke tests.

* :class:`PrefixTableDecoder` -- next-word distributions that are an arbitrary (seeded) function
  of the example and the whole prefix, so search results can be checked against brute-force
  enumeration of every sequence.
* :class:`ToyCoarseToFine` -- a miniature hard-attention model with the structure of C2F
  (coarse attention over chunks, the argmax or top-k chunks read, word attention inside them,
  a GRU decoder). Randomly initialized, it produces meaningless but well-formed summaries and
  all the ``extras`` (``coarse_attn``, ``chunk_read``, ``word_attn``); it is saved as a run
  directory by :func:`write_toy_run` so the ``summarize``/``evaluate`` commands can be
  exercised without the real models.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..kernels import choose, logsoftmax_topk
from .protocol import TopK, topk_of

__all__ = ["PrefixState", "PrefixTableDecoder", "ToyCoarseToFine", "ToyState", "load_toy_run", "write_toy_run"]


# --------------------------------------------------------------------------- prefix table


@dataclass
class PrefixState:
    """Rows of :class:`PrefixTableDecoder`: the example and the words so far of each row."""

    example: list[int]
    prefix: list[tuple[int, ...]]


class PrefixTableDecoder:
    """``p(w | prefix)`` is a seeded random distribution per ``(example, prefix)``.

    Args:
        vocab_size: ``V`` (ids below 4 are the specials; ``<pad>``/``<s>`` get no mass).
        seed: changes every distribution.
        temperature: lower values give peakier distributions.
    """

    def __init__(self, vocab_size: int, seed: int = 0, temperature: float = 1.0) -> None:
        self.vocab_size = vocab_size
        self.seed = seed
        self.temperature = temperature
        self.calls = 0

    def log_probs(self, example: int, prefix: tuple[int, ...]) -> torch.Tensor:
        """The distribution after ``prefix`` (words only, no ``<s>``), as ``(V,)`` log-probs."""
        key = hashlib.sha256(f"{self.seed}|{example}|{prefix}".encode()).digest()
        gen = torch.Generator().manual_seed(int.from_bytes(key[:8], "little"))
        logits = torch.randn(self.vocab_size, generator=gen, dtype=torch.float64) / self.temperature
        logits[0] = logits[2] = -math.inf
        return torch.log_softmax(logits, dim=0).float()

    def init_state(self, batch: Mapping[str, Any]) -> PrefixState:
        n = int(batch["src"].shape[0])
        return PrefixState(list(range(n)), [() for _ in range(n)])

    def step(self, state: PrefixState, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, PrefixState, dict[str, Any]]:
        self.calls += 1
        prefixes = [p if t == 2 else (*p, t) for p, t in zip(state.prefix, prev_tokens.tolist())]
        out = torch.stack([self.log_probs(e, p) for e, p in zip(state.example, prefixes)])
        return out, PrefixState(list(state.example), prefixes), {}

    #: The top-k step below is the full step's top k (nothing to fuse): not the default.
    fused_topk = False

    def step_topk(
        self, state: PrefixState, prev_tokens: torch.Tensor, k: int
    ) -> tuple[TopK, PrefixState, dict[str, Any]]:
        """The protocol's optional top-k step (:func:`~.protocol.topk_of` of :meth:`step`)."""
        log_probs, new_state, extras = self.step(state, prev_tokens)
        return topk_of(log_probs, k), new_state, extras

    def reorder(self, state: PrefixState, indices: torch.Tensor) -> PrefixState:
        idx = indices.tolist()
        return PrefixState([state.example[i] for i in idx], [state.prefix[i] for i in idx])


# --------------------------------------------------------------------------- toy C2F


@dataclass
class ToyState:
    """Rows of :class:`ToyCoarseToFine`: decoder hidden state and the row -> example map."""

    hidden: torch.Tensor  # (R, H)
    example: torch.Tensor  # (R,) long
    words: torch.Tensor  # (B, M, N, H) encoded source words, per example (never copied)
    chunks: torch.Tensor  # (B, M, H) chunk summaries
    mask: torch.Tensor  # (B, M, N) real source words


class ToyCoarseToFine(nn.Module):
    """A miniature coarse-to-fine attention decoder (see the module docstring).

    Args:
        vocab_size: ``V``.
        hidden: embedding and state size.
        coarse_topk: chunks read per step at test time (1 = argmax, C2F; >1 = +MULTI).
        seed: initialization seed.
    """

    def __init__(self, vocab_size: int, hidden: int = 16, coarse_topk: int = 1, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.vocab_size, self.hidden, self.coarse_topk = vocab_size, hidden, coarse_topk
        self.embed = nn.Embedding(vocab_size, hidden, padding_idx=0)
        self.cell = nn.GRUCell(2 * hidden, hidden)
        self.coarse_query = nn.Linear(hidden, hidden, bias=False)
        self.word_query = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(2 * hidden, vocab_size)

    @torch.no_grad()
    def init_state(self, batch: Mapping[str, Any]) -> ToyState:
        src, mask = batch["src"], batch["src_mask"]
        words = self.embed(src)  # (B, M, N, H)
        counts = mask.sum(-1, keepdim=True).clamp(min=1)
        chunks = (words * mask.unsqueeze(-1)).sum(2) / counts
        n = src.shape[0]
        return ToyState(torch.zeros(n, self.hidden), torch.arange(n), words, chunks, mask)

    @torch.no_grad()
    def step(
        self, state: ToyState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, ToyState, dict[str, torch.Tensor]]:
        features, new_state, extras = self._advance(state, prev_tokens)
        log_probs = torch.log_softmax(self.out(features), dim=-1)
        return log_probs, new_state, extras

    @property
    def fused_topk(self) -> bool:
        """Whether :meth:`step_topk` runs the Triton kernel (CUDA, or ``SCG_KERNELS=triton``)."""
        return choose(self.out.weight.device) == "triton"

    @torch.no_grad()
    def step_topk(
        self, state: ToyState, prev_tokens: torch.Tensor, k: int
    ) -> tuple[TopK, ToyState, dict[str, torch.Tensor]]:
        """The protocol's top-k step: the output layer, log-softmax and top-k in one
        ``scg_summarize.kernels.logsoftmax_topk`` call (the ``(R, V)`` log-probabilities are never
        written on the Triton backend)."""
        features, new_state, extras = self._advance(state, prev_tokens)
        values, indices = logsoftmax_topk(features, self.out.weight, self.out.bias, min(k, self.vocab_size))
        return TopK(values, indices), new_state, extras

    def _advance(
        self, state: ToyState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, ToyState, dict[str, torch.Tensor]]:
        """Attention and the GRU step: the output layer's input ``(R, 2H)``, the state, extras."""
        ex = state.example
        chunks, words, mask = state.chunks[ex], state.words[ex], state.mask[ex]
        chunk_real = mask.any(-1)  # (R, M)
        coarse = torch.einsum("rmh,rh->rm", chunks, self.coarse_query(state.hidden))
        coarse_attn = torch.softmax(coarse.masked_fill(~chunk_real, -math.inf), dim=-1)
        k = min(self.coarse_topk, coarse_attn.shape[1])
        chosen = coarse_attn.topk(k, dim=-1).indices
        read = torch.zeros_like(chunk_real).scatter(1, chosen, True) & chunk_real
        scores = torch.einsum("rmnh,rh->rmn", words, self.word_query(state.hidden))
        allowed = mask & read.unsqueeze(-1)
        flat = scores.masked_fill(~allowed, -math.inf).flatten(1)
        word_attn = torch.softmax(flat, dim=-1).nan_to_num(0.0).view_as(scores)
        context = torch.einsum("rmn,rmnh->rh", word_attn, words)
        hidden = self.cell(torch.cat([self.embed(prev_tokens), context], -1), state.hidden)
        new_state = ToyState(hidden, ex, state.words, state.chunks, state.mask)
        extras = {"coarse_attn": coarse_attn, "chunk_read": read, "word_attn": word_attn}
        return torch.cat([hidden, context], -1), new_state, extras

    def reorder(self, state: ToyState, indices: torch.Tensor) -> ToyState:
        return ToyState(state.hidden[indices], state.example[indices], state.words, state.chunks, state.mask)


# --------------------------------------------------------------------------- run directories

TOY_FACTORY = "scg_summarize.decoding.toy:load_toy_run"


def write_toy_run(run_dir: str | Path, data_dir: str | Path, *, hidden: int = 16, seed: int = 0) -> Path:
    """Save a randomly initialized :class:`ToyCoarseToFine` as a run directory.

    The directory gets ``decoder.json`` (naming :func:`load_toy_run` as its factory), the
    model weights, a copy of the data's ``vocab.txt`` and its preprocessing options.
    """
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(data_dir / "vocab.txt", run_dir / "vocab.txt")
    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    vocab_size = sum(1 for line in (run_dir / "vocab.txt").read_text(encoding="utf-8").split("\n") if line)
    model = ToyCoarseToFine(vocab_size, hidden=hidden, seed=seed)
    torch.save(model.state_dict(), run_dir / "toy.pt")
    spec = {
        "factory": TOY_FACTORY,
        "model": "TOY-C2F",
        "options": {"hidden": hidden, "vocab_size": vocab_size},
        "prep_options": meta["options"],
        "data": str(data_dir),
    }
    (run_dir / "decoder.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return run_dir


def load_toy_run(
    run_dir: Path, spec: Mapping[str, Any], *, coarse_topk: int = 1, device: str = "cpu", checkpoint: str | None = None
) -> ToyCoarseToFine:
    """The factory named in a toy run's ``decoder.json`` (``checkpoint`` defaults to ``toy.pt``)."""
    options = spec.get("options", {})
    model = ToyCoarseToFine(int(options["vocab_size"]), hidden=int(options.get("hidden", 16)), coarse_topk=coarse_topk)
    weights = Path(checkpoint) if checkpoint else run_dir / "toy.pt"
    model.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
    return model.eval()
