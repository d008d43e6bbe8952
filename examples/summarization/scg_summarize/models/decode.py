"""Decoding: greedy and beam search (C2F reads its argmax / top-k chunks, a deterministic choice).

Both return token ids without ``<s>``/``</s>``. Beam search keeps ``beam`` hypotheses per example,
scores finished ones by log p / length^α (``length_penalty`` = α), can forbid repeated n-grams
(``block_ngram``, a common remedy for the repetition of small attentional decoders), and stops
when every example has ``beam`` finished hypotheses or at ``max_len``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .attention import AttentionOut
from .summarizer import Summarizer

__all__ = ["Decoded", "beam_search", "greedy_decode"]

BOS, EOS, PAD = 2, 3, 0


@dataclass
class Decoded:
    """Decoded ids per example, and (greedy, ``record=True``) each step's attention."""

    tokens: list[list[int]]
    attention: list[AttentionOut] = field(default_factory=list)


def _ban_specials(lp: torch.Tensor, t: int, min_len: int) -> torch.Tensor:
    lp[:, PAD] = float("-inf")
    lp[:, BOS] = float("-inf")
    if t < min_len:
        lp[:, EOS] = float("-inf")
    return lp


@torch.no_grad()
def greedy_decode(model: Summarizer, src: torch.Tensor, src_mask: torch.Tensor, max_len: int = 50,
                  min_len: int = 0, record: bool = False) -> Decoded:
    """Greedy decoding (the argmax word each step) of a batch ``(B, M, N)``."""
    memory, final = model.encode(src, src_mask)
    state = model.init_state(memory, final)
    B = src.shape[0]
    y = torch.full((B,), BOS, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    out_ids: list[torch.Tensor] = []
    atts: list[AttentionOut] = []
    for t in range(max_len):
        out, state, att = model.decoder.step(state, model.tgt_embedding(y), memory, t, "greedy")
        if record:
            atts.append(att)
        y = _ban_specials(model.log_probs(out), t, min_len).argmax(-1)  # (B,)
        y = y.masked_fill(done, EOS)
        out_ids.append(y)
        done |= y == EOS
        if bool(done.all()):
            break
    ids = torch.stack(out_ids, 1).tolist()
    tokens = [row[: row.index(EOS)] if EOS in row else row for row in ids]
    return Decoded(tokens, atts)


def _blocked(history: list[int], n: int) -> set[int]:
    """Tokens that would repeat an n-gram already in ``history``."""
    if n <= 0 or len(history) < n - 1:
        return set()
    prefix = tuple(history[len(history) - n + 1:]) if n > 1 else ()
    banned = set()
    for i in range(len(history) - n + 1):
        if tuple(history[i:i + n - 1]) == prefix:
            banned.add(history[i + n - 1])
    return banned


@torch.no_grad()
def beam_search(model: Summarizer, src: torch.Tensor, src_mask: torch.Tensor, beam: int = 5, max_len: int = 50,
                min_len: int = 0, length_penalty: float = 1.0, block_ngram: int = 0) -> Decoded:
    """Beam search over a batch ``(B, M, N)``; returns the best finished hypothesis per example."""
    if beam <= 1:
        return greedy_decode(model, src, src_mask, max_len, min_len)
    B, K = src.shape[0], beam
    memory, final = model.encode(src, src_mask)
    state = model.init_state(memory, final)
    state = state.select(torch.arange(B, device=src.device).repeat_interleave(K))
    memory = memory.repeat(K)
    scores = torch.full((B, K), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    history: list[list[int]] = [[] for _ in range(B * K)]
    y = torch.full((B * K,), BOS, dtype=torch.long, device=src.device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    for t in range(max_len):
        out, state, _ = model.decoder.step(state, model.tgt_embedding(y), memory, t, "greedy")
        lp = _ban_specials(model.log_probs(out), t, min_len)  # (BK, V)
        if block_ngram:
            for r, hist in enumerate(history):
                for tok in _blocked(hist, block_ngram):
                    lp[r, tok] = float("-inf")
        V = lp.shape[1]
        cand = (scores.view(B * K, 1) + lp).view(B, K * V)
        top_scores, top_index = cand.topk(2 * K, dim=1)  # (B, 2K)
        new_rows, new_tokens, new_scores = [], [], []
        for b in range(B):
            kept = 0
            for s, ix in zip(top_scores[b].tolist(), top_index[b].tolist()):
                if s == float("-inf"):
                    break
                row, tok = b * K + ix // V, ix % V
                if tok == EOS:
                    if len(finished[b]) < K:
                        length = len(history[row]) + 1
                        finished[b].append((s / length ** length_penalty, history[row]))
                    continue
                new_rows.append(row)
                new_tokens.append(tok)
                new_scores.append(s)
                kept += 1
                if kept == K:
                    break
            while kept < K:  # pad with dead hypotheses
                new_rows.append(b * K)
                new_tokens.append(EOS)
                new_scores.append(float("-inf"))
                kept += 1
        if all(len(f) >= K for f in finished):
            break
        index = torch.tensor(new_rows, device=src.device)
        state = state.select(index)
        history = [history[r] + [tok] for r, tok in zip(new_rows, new_tokens)]
        y = torch.tensor(new_tokens, device=src.device)
        scores = torch.tensor(new_scores, device=src.device).view(B, K)
    tokens = []
    for b in range(B):
        if finished[b]:
            tokens.append(max(finished[b], key=lambda x: x[0])[1])
        else:
            best = int(scores[b].argmax())
            tokens.append(history[b * K + best])
    return Decoded(tokens)
