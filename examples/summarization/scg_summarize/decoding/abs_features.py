"""ABS+: the log-linear score with extractive features, and the extractive constraint.

Rush, Chopra & Weston (2015), Section 5. The score of a summary is ``s(y, x) = Σ_i α · f(y_{i+1},
x, y_c)`` with five features of each generated word ``w = y_{i+1}``:

    f_0 = log p(w | x, y_c)                           (the model)
    f_1 = 1{w occurs in x}                            (unigram match)
    f_2 = 1{(y_i, w) occurs in x}                     (bigram match)
    f_3 = 1{(y_{i-1}, y_i, w) occurs in x}            (trigram match)
    f_4 = 1{∃ k > j: y_i = x_k and w = x_j}           (out-of-order bigram: w occurs before y_i)

``α = (1, 0, 0, 0, 0)`` is plain ABS. ``</s>`` gets no indicator (it is never an input word), and
``<s>`` padding never matches. :class:`LogLinearDecoder` wraps any step decoder (an ABS run: the model through
:class:`~scg_summarize.decoding.adapters.ModelStepDecoder`, in corpus ids) and returns
``α · f`` for every next word in place of the log-probabilities, so beam search maximizes ``s``
step by step (Algorithm 1). Positive ``α_1..α_4`` make step scores exceed 0 by at most
``max_step_bonus = Σ_{k≥1} max(α_k, 0)``, which beam search's exact early stop accounts for.
``α_0`` must be positive (the scale is free, so tuning fixes it at 1; see
:mod:`scg_summarize.evaluation.mert`).

The extractive mode (``extractive=True``, Eq. 2) allows only input words (and ``</s>``) to be
generated, for any ``α``.

The features depend on the last two words only, so the wrapper keeps recombination exact
(``markov_window = max(C, 2)``). :func:`feature_totals` recomputes ``Σ_i f`` of finished
hypotheses (teacher-forced through the wrapped decoder for ``f_0``, with plain Python sets for
the indicators) for the n-best lists that MERT tunes ``α`` on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..data.batching import SourceBatch
from ..data.chunking import pack_words
from .blocking import SpecialIds
from .protocol import StepDecoder, check_step_output, request_extras

__all__ = ["FEATURES", "LogLinearDecoder", "LogLinearState", "feature_totals", "input_indicators", "word_features"]

#: The feature names, in the order of α.
FEATURES: tuple[str, ...] = ("log_p", "unigram", "bigram", "trigram", "reorder")


@dataclass
class LogLinearState:
    """Rows of :class:`LogLinearDecoder`: the wrapped state, each row's example, its last two words."""

    inner: Any
    example: torch.Tensor  # (R,)
    last: torch.Tensor  # (R, 2): y_{i-1}, y_i (<s>-padded)
    words: torch.Tensor  # (B, L) the input in output-vocabulary ids (-1 = no output id, or padding)


def _hits(rows: int, vocab: int, words: torch.Tensor, match: torch.Tensor) -> torch.Tensor:
    """bool ``(R, V)``: True at ``words[r, j]`` for every ``j`` with ``match[r, j]``."""
    out = torch.zeros(rows, vocab + 1, dtype=torch.float32, device=words.device)
    index = torch.where(match & (words >= 0), words, torch.full_like(words, vocab))  # misses land in column V
    out.scatter_add_(1, index, torch.ones_like(index, dtype=torch.float32))
    return out[:, :vocab] > 0


def input_indicators(words: torch.Tensor, last: torch.Tensor, vocab: int) -> torch.Tensor:
    """The indicator features ``f_1..f_4`` of every next word, float ``(R, 4, V)``.

    Args:
        words: long ``(R, L)``: each row's input words (-1 at padding).
        last: long ``(R, 2)``: ``y_{i-1}, y_i`` of each row.
        vocab: ``V``.
    """
    rows = words.shape[0]
    prev2, prev = last[:, :1], last[:, 1:]  # (R, 1)
    real = words >= 0
    unigram = _hits(rows, vocab, words, real)
    bigram = _hits(rows, vocab, words[:, 1:], real[:, 1:] & (words[:, :-1] == prev))
    trigram = _hits(rows, vocab, words[:, 2:], real[:, 2:] & (words[:, 1:-1] == prev) & (words[:, :-2] == prev2))
    is_prev = (words == prev) & real  # (R, L)
    later = (is_prev.flip(1).cumsum(1).flip(1) - is_prev.long()) > 0  # y_i occurs after position j
    reorder = _hits(rows, vocab, words, real & later)
    return torch.stack([unigram, bigram, trigram, reorder], dim=1).float()


class LogLinearDecoder:
    """A step decoder scoring next words by ``α · f`` (see the module docstring).

    Args:
        inner: the model (any step decoder; its ``step`` gives ``f_0``).
        weights: ``α``, five numbers (``α_0 > 0``).
        extractive: allow only input words (and ``</s>``).
        special: the special ids (``</s>`` gets no indicator).
    """

    fused_topk = False

    def __init__(
        self,
        inner: StepDecoder[Any],
        weights: Sequence[float] = (1.0, 0.0, 0.0, 0.0, 0.0),
        *,
        extractive: bool = False,
        special: SpecialIds | None = None,
    ) -> None:
        alpha = [float(w) for w in weights]
        if len(alpha) != len(FEATURES):
            raise ValueError(f"weights must have {len(FEATURES)} entries {FEATURES}, got {len(alpha)}")
        if not alpha[0] > 0:
            raise ValueError(f"the weight of log p (weights[0]) must be positive, got {alpha[0]}")
        self.inner, self.weights, self.extractive = inner, alpha, extractive
        self.special = special or SpecialIds()
        self.max_step_bonus = sum(max(w, 0.0) for w in alpha[1:])
        inner_window = getattr(inner, "markov_window", None)
        if isinstance(inner_window, int):
            self.markov_window = max(inner_window, 2)
        vocab = getattr(inner, "vocab_size", None)
        if vocab is not None:
            self.vocab_size = int(vocab)

    @property
    def offered_extras(self) -> tuple[str, ...] | None:
        """The wrapped model's (the protocol's optional attribute; None when it declares none)."""
        offered: tuple[str, ...] | None = getattr(self.inner, "offered_extras", None)
        return offered

    def request_extras(self, names: Iterable[str]) -> None:
        """The protocol's optional hook, passed on to the wrapped model."""
        request_extras(self.inner, names)

    def init_state(self, batch: SourceBatch) -> LogLinearState:
        words, mask, _ = pack_words(batch.src, batch.src_mask)
        inner = self.inner.init_state(batch)
        n = words.shape[0]
        last = torch.full((n, 2), self.special.bos, dtype=torch.long, device=words.device)
        return LogLinearState(inner, torch.arange(n, device=words.device), last, words.masked_fill(~mask, -1))

    def step(
        self, state: LogLinearState, prev_tokens: torch.Tensor
    ) -> tuple[torch.Tensor, LogLinearState, Mapping[str, torch.Tensor]]:
        rows = prev_tokens.shape[0]
        log_probs, inner, extras = check_step_output(self.inner.step(state.inner, prev_tokens), rows, "inner.step()")
        vocab = log_probs.shape[1]
        last = torch.cat([state.last[:, 1:], prev_tokens.unsqueeze(1)], dim=1)
        words = state.words[state.example]  # (R, L) corpus ids, -1 at padding
        if words.numel() and words.max() >= vocab:
            raise ValueError(f"input word id {int(words.max())} is outside the model's vocabulary ({vocab} words)")
        scores = self.weights[0] * log_probs.float()
        if any(self.weights[1:]) or self.extractive:
            feats = input_indicators(words, last, vocab)  # (R, 4, V)
            bonus = torch.einsum("k,rkv->rv", torch.tensor(self.weights[1:], device=feats.device), feats)
            bonus[:, self.special.eos] = 0.0
            scores = scores + bonus
            if self.extractive:
                allowed = feats[:, 0] > 0
                allowed[:, self.special.eos] = True
                scores = scores.masked_fill(~allowed, float("-inf"))
        return scores, LogLinearState(inner, state.example, last, state.words), extras

    def reorder(self, state: LogLinearState, indices: torch.Tensor) -> LogLinearState:
        return LogLinearState(
            self.inner.reorder(state.inner, indices), state.example[indices], state.last[indices], state.words
        )


def word_features(source: Sequence[int], tokens: Sequence[int], bos: int = 2) -> list[list[float]]:
    """The indicators ``f_1..f_4`` of every word of ``tokens`` given the input ``source`` (plain
    Python, the reference for :func:`input_indicators`)."""
    unigrams = set(source)
    bigrams = set(itertools.pairwise(source))
    trigrams = set(zip(source, source[1:], source[2:]))
    out = []
    padded = [bos, bos, *tokens]
    for i, w in enumerate(tokens):
        a, b = padded[i], padded[i + 1]
        reorder = any(source[j] == w and b in source[j + 1 :] for j in range(len(source)))
        out.append([float(w in unigrams), float((b, w) in bigrams), float((a, b, w) in trigrams), float(reorder)])
    return out


@torch.no_grad()
def feature_totals(
    inner: StepDecoder[Any],
    batch: SourceBatch,
    hypotheses: Sequence[Sequence[Sequence[int]]],
    special: SpecialIds | None = None,
) -> list[torch.Tensor]:
    """``Σ_i f`` of each hypothesis: for example ``b``, a float64 ``(n_b, 5)`` tensor.

    ``hypotheses[b]`` are token lists (no ``<s>``/``</s>``) of example ``b`` of ``batch``;
    ``f_0`` sums ``log p`` of the words and of ``</s>`` (teacher-forced through ``inner``).
    """
    special = special or SpecialIds()
    words, mask, _ = pack_words(batch.src, batch.src_mask)
    owners = [b for b, hyps in enumerate(hypotheses) for _ in hyps]
    seqs = [list(h) for hyps in hypotheses for h in hyps]
    totals = torch.zeros(len(seqs), len(FEATURES), dtype=torch.float64)
    if seqs:
        device = words.device
        state = inner.reorder(inner.init_state(batch), torch.tensor(owners, dtype=torch.long, device=device))
        longest = max(len(s) for s in seqs)
        prev = torch.full((len(seqs),), special.bos, dtype=torch.long, device=device)
        for t in range(longest + 1):
            log_probs, state, _ = check_step_output(inner.step(state, prev), len(seqs), "inner.step()")
            target = [s[t] if t < len(s) else special.eos for s in seqs]
            picked = log_probs.gather(1, torch.tensor(target, device=device).unsqueeze(1)).squeeze(1).double().cpu()
            live = torch.tensor([t <= len(s) for s in seqs])
            totals[:, 0] += torch.where(live, picked, torch.zeros_like(picked))
            prev = torch.tensor([s[t] if t < len(s) else special.eos for s in seqs], device=device)
        for i, (b, seq) in enumerate(zip(owners, seqs)):
            source = [int(w) for w, m in zip(words[b].tolist(), mask[b].tolist()) if m and w >= 0]
            feats = word_features(source, seq, special.bos)
            if feats:
                totals[i, 1:] = torch.tensor(feats, dtype=torch.float64).sum(0)
    out, start = [], 0
    for hyps in hypotheses:
        out.append(totals[start : start + len(hyps)])
        start += len(hyps)
    return out
