"""Small random batches and models for the model tests (no corpus needed)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from scg_summarize.data import Batch
from scg_summarize.models import C2FConfig, C2FSummarizer

V = 40


def make_batch(B: int = 3, M: int = 4, N: int = 6, T: int = 5, seed: int = 0) -> Batch:
    """Right-padded chunks (some empty), targets of different lengths."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, N + 1, (B, M), generator=g)
    lengths[:, 0] = torch.clamp(lengths[:, 0], min=2)  # every document has words
    lengths[0, -1] = 0  # an empty chunk
    mask = torch.arange(N).view(1, 1, N) < lengths.unsqueeze(-1)
    src = torch.randint(4, V, (B, M, N), generator=g) * mask
    tgt_len = torch.tensor([T] + [max(2, T - 1 - i) for i in range(B - 1)])
    tgt_mask = torch.arange(T).unsqueeze(0) < tgt_len.unsqueeze(1)
    tgt = torch.randint(4, V, (B, T), generator=g)
    tgt[:, 0] = 2
    tgt[torch.arange(B), tgt_len - 1] = 3
    tgt = tgt * tgt_mask
    return Batch(src=src, src_mask=mask, tgt=tgt, tgt_mask=tgt_mask, salient=torch.zeros(B, dtype=torch.long))


def tiny_c2f_config(vocab_size: int, emb_dim: int, hidden: int) -> C2FConfig:
    """A C2F model small enough to enumerate by hand: two chunks, one layer each way, no dropout."""
    return C2FConfig(
        vocab_size=vocab_size,
        attention="c2f",
        num_chunks=2,
        emb_dim=emb_dim,
        hidden=hidden,
        enc_layers=1,
        dec_layers=1,
        conv_filters=3,
        conv_width=2,
        dropout=0.0,
        init_range=0.5,
    )


def make_model(attention: str = "c2f", seed: int = 0, **options: Any) -> C2FSummarizer:
    torch.manual_seed(seed)
    config = C2FConfig(
        vocab_size=V,
        num_chunks=options.pop("num_chunks", 8),
        emb_dim=10,
        hidden=12,
        enc_layers=2,
        dec_layers=2,
        conv_filters=7,
        conv_width=3,
        pos_dim=3,
        attention=attention,
        **options,
    )
    return C2FSummarizer(config)


def pad_batch(batch: Batch, extra_chunks: int = 0, extra_words: int = 0) -> Batch:
    """The same documents with more padding chunks / padding words per chunk."""
    src, mask = batch.src, batch.src_mask
    B, M, N = src.shape
    new_src = torch.zeros(B, M + extra_chunks, N + extra_words, dtype=src.dtype)
    new_mask = torch.zeros(B, M + extra_chunks, N + extra_words, dtype=torch.bool)
    new_src[:, :M, :N] = src
    new_mask[:, :M, :N] = mask
    return replace(batch, src=new_src, src_mask=new_mask)
