"""Chunk encoders: one vector u_i per chunk, the keys of the coarse attention α^s.

Interface (:class:`ChunkEncoder`): ``forward(src, mask, emb) -> (B, M, D)`` with ``src``/``mask``
the ``(B, M, N)`` grid and ``emb`` its word embeddings ``(B, M, N, E)``; ``out_dim`` is D.
Rows of all-padding chunks are zero (the attention masks them anyway).

* :class:`ConvChunkEncoder` (CONV, Kim 2014): a convolution of width w with F filters over
  the chunk's word embeddings, tanh, and max over time:

      u_i = max_p tanh(W_conv · [x_{i,p-w+1}; ...; x_{i,p}] + b),   u_i ∈ R^F.

  The convolution is *wide* (w − 1 zeros on the left), and only the windows that contain at
  least one real word enter the max, so a chunk's vector does not depend on the padding that
  follows it (padding embeddings are zero).
* :class:`BowChunkEncoder` (BOW): u_i = Σ_j e'(x_ij), the sum of a *separate, frozen* embedding
  e' (random, or word2vec vectors when the run loads them).
* :class:`WithPosition` (+POS): u_i ← [u_i; p_i], p_i a learned ``pos_dim`` embedding of i.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["BowChunkEncoder", "ChunkEncoder", "ConvChunkEncoder", "WithPosition", "build_chunk_encoder"]


class ChunkEncoder(nn.Module):
    """Base class: ``forward(src (B,M,N), mask (B,M,N), emb (B,M,N,E)) -> (B, M, out_dim)``."""

    out_dim: int

    def forward(self, src: torch.Tensor, mask: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


class ConvChunkEncoder(ChunkEncoder):
    """CONV: wide convolution (width ``width``, ``filters`` filters), tanh, masked max over time."""

    def __init__(self, emb_dim: int, filters: int = 600, width: int = 6) -> None:
        super().__init__()
        self.width = width
        self.out_dim = filters
        self.conv = nn.Conv1d(emb_dim, filters, kernel_size=width, padding=width - 1)

    def forward(self, src: torch.Tensor, mask: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        del src
        B, M, N, E = emb.shape
        x = emb.reshape(B * M, N, E).transpose(1, 2)  # (BM, E, N)
        y = torch.tanh(self.conv(x))[:, :, : N + self.width - 1]  # (BM, F, N + w - 1), window p ends at word p
        lengths = mask.reshape(B * M, N).sum(1)  # (BM,)
        positions = torch.arange(y.shape[2], device=y.device)
        valid = positions.unsqueeze(0) < (lengths + self.width - 1).unsqueeze(1)  # (BM, N + w - 1)
        valid = valid & (lengths > 0).unsqueeze(1)
        y = y.masked_fill(~valid.unsqueeze(1), -2.0)  # below tanh's range
        u = y.max(dim=2).values  # (BM, F)
        u = u * (lengths > 0).unsqueeze(1).to(u.dtype)
        return u.reshape(B, M, self.out_dim)


class BowChunkEncoder(ChunkEncoder):
    """BOW: the sum of a separate, frozen word embedding over the chunk's real words."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.out_dim = dim
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.embedding.weight.requires_grad_(False)

    def forward(self, src: torch.Tensor, mask: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        del emb
        e: torch.Tensor = self.embedding(src) * mask.unsqueeze(-1).to(self.embedding.weight.dtype)  # (B, M, N, D)
        return e.sum(2)  # (B, M, D)


class WithPosition(ChunkEncoder):
    """+POS: concatenate a learned embedding of the chunk index i to u_i."""

    def __init__(self, inner: ChunkEncoder, num_chunks: int, pos_dim: int = 25) -> None:
        super().__init__()
        self.inner = inner
        self.position = nn.Embedding(num_chunks, pos_dim)
        self.out_dim = inner.out_dim + pos_dim

    def forward(self, src: torch.Tensor, mask: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        u = self.inner(src, mask, emb)  # (B, M, D)
        B, M, _ = u.shape
        if M > self.position.num_embeddings:
            raise ValueError(
                f"+POS was built for {self.position.num_embeddings} chunks (model.num_chunks), got a batch "
                f"with {M}; leave model.num_chunks at 0 (it is read from the corpus, or data.regrid)"
            )
        p = self.position.weight[:M].unsqueeze(0).expand(B, M, -1)  # (B, M, P)
        real = mask.any(-1, keepdim=True).to(u.dtype)  # (B, M, 1)
        return torch.cat([u, p * real], dim=-1)


def build_chunk_encoder(
    kind: str,
    *,
    emb_dim: int,
    vocab_size: int,
    filters: int,
    width: int,
    bow_dim: int,
    pos: bool,
    num_chunks: int,
    pos_dim: int,
) -> ChunkEncoder:
    """The chunk encoder named by ``kind`` (``conv``/``bow``), wrapped in +POS if ``pos``."""
    enc: ChunkEncoder
    if kind == "conv":
        enc = ConvChunkEncoder(emb_dim, filters, width)
    elif kind == "bow":
        enc = BowChunkEncoder(vocab_size, bow_dim or emb_dim)
    else:
        raise ValueError(f"unknown chunk encoder {kind!r}")
    if pos:
        if num_chunks < 1:
            raise ValueError("+POS needs model.num_chunks (the corpus's M)")
        enc = WithPosition(enc, num_chunks, pos_dim)
    return enc
