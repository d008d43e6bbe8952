"""Separate source/target vocabularies and the extended vocabulary of a copying generator.

The prepared corpus has one vocabulary of V words (ids ``0..3`` special, then by frequency). A
model with ``model.tgt_vocab_size = V_t < V`` reads all V words (the source embedding has V
rows: Paulus et al. 2018 use 150k) but *generates* only the V_t most frequent (50k in the paper):
its softmax has V_t outputs and target words outside them are ``<unk>`` to the generator.

A pointer can still produce them: the **extended vocabulary** of a batch appends one slot per
distinct out-of-target-vocabulary word that occurs in the batch's sources,

    ids 0 .. V_t − 1: the target vocabulary;   V_t + k: the k-th such word (``oov[k]``, a corpus id),

and the copy distribution scatters each source position's attention onto its extended id, so
copying an unknown source word puts the mass on *that word*, not on ``<unk>``
(:func:`extend_source`). A reference word outside V_t is trained as its slot when it occurs in
the same example's source, else as ``<unk>`` (:func:`extend_targets`); generated slots map back
to corpus ids (:func:`to_corpus`), which is what decoding and ROUGE see, and are fed back to
the decoder as ``<unk>`` (:func:`to_input`; the decoder has no embedding for them).

With V_t = V nothing is out of vocabulary (K = 0) and the copy distribution lands on the
corpus ids directly; source words that the corpus itself mapped to ``<unk>`` stay ``<unk>``.
"""

from __future__ import annotations

import torch

__all__ = ["extend_source", "extend_targets", "to_corpus", "to_input"]


def extend_source(src: torch.Tensor, src_mask: torch.Tensor, target_vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Extended ids of the source and the batch's out-of-target-vocabulary words.

    Args:
        src: ``(B, ...)`` corpus ids; src_mask: the same shape, True at real words.
        target_vocab: V_t.

    Returns:
        ``ext`` (same shape as ``src``): ids < V_t unchanged, the others V_t + k; and ``oov``
        ``(K,)``: the corpus id of slot k (sorted).
    """
    outside = (src >= target_vocab) & src_mask
    oov = torch.unique(src[outside])  # (K,) sorted
    if oov.numel() == 0:
        return src.clone(), oov
    slot = torch.searchsorted(oov, src.clamp(min=target_vocab)).clamp(max=oov.numel() - 1)
    ext = torch.where(outside, target_vocab + slot, src)
    return ext, oov


def extend_targets(
    tgt: torch.Tensor, src: torch.Tensor, src_mask: torch.Tensor, oov: torch.Tensor, target_vocab: int, unk: int = 1
) -> torch.Tensor:
    """Targets ``(B, T)`` (corpus ids) in the extended space: a word outside V_t is its slot when
    it occurs in its own example's source, else ``unk``."""
    outside = tgt >= target_vocab
    if oov.numel() == 0 or not bool(outside.any()):
        return torch.where(outside, torch.full_like(tgt, unk), tgt)
    B = tgt.shape[0]
    flat_src = src.reshape(B, -1).masked_fill(~src_mask.reshape(B, -1), -1)  # (B, L)
    in_source = (tgt.unsqueeze(2) == flat_src.unsqueeze(1)).any(2)  # (B, T)
    slot = torch.searchsorted(oov, tgt.clamp(min=target_vocab)).clamp(max=oov.numel() - 1)  # (B, T)
    found = oov[slot] == tgt
    ext = torch.where(in_source & found, target_vocab + slot, torch.full_like(tgt, unk))
    return torch.where(outside, ext, tgt)


def to_corpus(tokens: torch.Tensor, oov_rows: torch.Tensor, target_vocab: int) -> torch.Tensor:
    """Extended ids ``(B, L)`` -> corpus ids, given each row's slot table ``oov_rows`` ``(B, K)``."""
    outside = tokens >= target_vocab
    if oov_rows.shape[1] == 0:
        return tokens
    slot = (tokens - target_vocab).clamp(0, oov_rows.shape[1] - 1)
    return torch.where(outside, oov_rows.gather(1, slot), tokens)


def to_input(tokens: torch.Tensor, target_vocab: int, unk: int = 1) -> torch.Tensor:
    """Ids fed back to the decoder: anything outside V_t (corpus or extended id) becomes ``unk``."""
    return torch.where(tokens >= target_vocab, torch.full_like(tokens, unk), tokens)
