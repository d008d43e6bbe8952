"""The MAL summarizer (Li, Bing, Wei & Lam): encoder, saliency attentions, cGRU decoder, the
multi-attention integration (eq. 17), the output softmax (eq. 18) and the objective (eq. 19-21).

::

    h^a_t = tanh(W^d_ha h^{d2}_t + W^d_{c^s a} c^s + W^d_{c^u a} c^u + b^d_ha)      (17)
    ŷ_t = softmax(W^d_hy h^a_t + b^d_hy)                                          (18)
    L_NLL = −Σ_t log p(y_t | y_<t, X)                                              (20)
    L = L_s + L_NLL                                                                (21)

L_s (eq. 19) is the supervised attention's per-word cross-entropy (:mod:`.saliency`); L is
per document and averaged over the batch. The ablation rows (:data:`~.config.ABLATIONS`) drop
c^s (and L_s) or c^u from eq. (17).

The model reads the source as one flat sequence: the prepared ``(B, M, N)`` chunk grid with
its padding moved to the end (:func:`flatten_source`), cut to ``max_src_len`` words. The
content-word table of the corpus vocabulary (:class:`~scg_summarize.data.saliency_labels.ContentWords`)
is a buffer, so a checkpoint carries what the labels and the graph's vertices need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...data.batching import SourceBatch
from ...data.chunking import pack_flat
from ...data.saliency_labels import ContentWords, load_stopwords
from ...data.vocab import Vocab
from ..common.saliency_maps import SaliencyMaps
from .cgru import ConditionalGRU, DecoderMemory, mean_state
from .config import MALConfig
from .encoder import BiGRUEncoder
from .pagerank import UnsupervisedAttention, UnsupervisedOut
from .saliency import SaliencyOut, SupervisedAttention, normalized_entropy, saliency_loss

__all__ = ["MALEncoded", "MALOutput", "MALSummarizer", "MALTerms", "flatten_source"]


def flatten_source(src: torch.Tensor, src_mask: torch.Tensor, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(B, M, N)`` grid as ``(B, L)`` sequences, real words first in document order, cut to
    ``max_len`` and to the longest document."""
    flat, mask = pack_flat(src, src_mask)  # (B, MN)
    length = max(min(int(mask.sum(-1).max()), max_len), 1)
    return flat[:, :length], mask[:, :length]


@dataclass
class MALEncoded:
    """A batch encoded for decoding (one row per example).

    Attributes:
        src: the flat source ids ``(B, L)``; ``mask`` ``(B, L)`` its real words.
        memory: the decoder's attention memory.
        h0: the decoder's initial state (the mean encoder state) ``(B, S)``.
        bias: the step-independent part of eq. (17), W c^s + W c^u + b ``(B, k_h)``.
        saliency: the supervised attention (None without +SuAtt).
        graph: the unsupervised attention (None without +UnAtt).
        nodes: bool ``(B, L)``, the graph's vertices (content words).
    """

    src: torch.Tensor
    mask: torch.Tensor
    memory: DecoderMemory
    h0: torch.Tensor
    bias: torch.Tensor
    saliency: SaliencyOut | None
    graph: UnsupervisedOut | None
    nodes: torch.Tensor


@dataclass
class MALTerms:
    """The teacher-forced pieces of one batch (:meth:`MALSummarizer.teacher_terms`).

    Attributes:
        encoded: the encoded batch.
        attention: the decoder attention a^d ``(B, T-1, L)``.
        nll: −log p(y_t) ``(B, T-1)`` (0 at padding); out_mask: bool ``(B, T-1)``.
        loss_s: L_s per document ``(B,)`` (0 without +SuAtt).
        entropy_s / entropy_u / label_rate: as in :class:`MALOutput`.
    """

    encoded: MALEncoded
    attention: torch.Tensor
    nll: torch.Tensor
    out_mask: torch.Tensor
    loss_s: torch.Tensor
    entropy_s: float | None
    entropy_u: float | None
    label_rate: float | None


@dataclass
class MALOutput:
    """Teacher-forced losses of one batch.

    Attributes:
        loss: L (eq. 21) averaged over documents (the training loss).
        nll: L_NLL summed over the batch (eq. 20 summed over documents).
        loss_s: L_s averaged over documents (eq. 19; 0 without +SuAtt).
        tokens: predicted target tokens.
        entropy_s / entropy_u: mean normalized entropy of a^s / a^u (1 = uniform; None when
            the attention is off).
        label_rate: the fraction of real source words labelled salient (None without +SuAtt).
    """

    loss: torch.Tensor
    nll: torch.Tensor
    loss_s: torch.Tensor
    tokens: int
    entropy_s: float | None
    entropy_u: float | None
    label_rate: float | None

    def metrics(self) -> dict[str, Any]:
        """JSON-ready numbers: every term of the objective and the attention entropies."""
        return {
            "loss": float(self.loss.detach()),
            "loss_s": float(self.loss_s.detach()),
            "nll_sum": float(self.nll.detach()),
            "tokens": self.tokens,
            "entropy_s": self.entropy_s,
            "entropy_u": self.entropy_u,
            "label_rate": self.label_rate,
        }


class MALSummarizer(nn.Module):
    """seq2seq, +SuAtt, +UnAtt or +MAL (``config.suatt`` / ``config.unatt``).

    Args:
        config: the hyperparameters (``vocab_size`` must be set).
        content: bool ``(V,)``, the vocabulary's content words (labels and graph vertices).
    """

    content: torch.Tensor  #: the buffer of content words (V,)

    def __init__(self, config: MALConfig, content: torch.Tensor) -> None:
        super().__init__()
        if config.vocab_size < 5:
            raise ValueError("mal.vocab_size must be set (the corpus vocabulary size)")
        if content.shape != (config.vocab_size,) or content.dtype != torch.bool:
            raise ValueError(
                f"content must be a bool tensor of shape ({config.vocab_size},), "
                f"got {content.dtype} {tuple(content.shape)}"
            )
        self.config = config
        V, E, H = config.vocab_size, config.emb_dim, config.hidden
        S = 2 * H
        self.register_buffer("content", content.clone())
        self.src_embedding = nn.Embedding(V, E, padding_idx=0)
        self.tgt_embedding = self.src_embedding if config.share_embeddings else nn.Embedding(V, E, padding_idx=0)
        self.encoder = BiGRUEncoder(E, H)
        self.supervised = SupervisedAttention(E, S, H, config.temperature_s) if config.suatt else None
        self.unsupervised = (
            UnsupervisedAttention(E, config.damping, config.pagerank_guard, config.temperature_u, config.scale_by_nodes)
            if config.unatt
            else None
        )
        self.decoder = ConditionalGRU(E, S, H)
        self.w_top = nn.Linear(S, H)  # W^d_ha, b^d_ha (eq. 17)
        self.w_cs = nn.Linear(S, H, bias=False) if config.suatt else None  # W^d_{c^s a}
        self.w_cu = nn.Linear(E, H, bias=False) if config.unatt else None  # W^d_{c^u a}
        self.out = nn.Linear(H, V)  # W^d_hy, b^d_hy (eq. 18)
        self.reset_parameters()

    @classmethod
    def for_vocab(cls, config: MALConfig, vocab: Vocab) -> MALSummarizer:
        """A model for ``vocab`` (fills ``config.vocab_size``; stopwords from ``config.stopwords``)."""
        if config.vocab_size == 0:
            config.vocab_size = len(vocab)
        if config.vocab_size != len(vocab):
            raise ValueError(f"mal.vocab_size is {config.vocab_size} but the vocabulary has {len(vocab)} words")
        return cls(config, ContentWords(vocab, load_stopwords(config.stopwords)).table)

    def reset_parameters(self) -> None:
        """Uniform in [−r, r] (r = ``init_range``); padding embeddings zero."""
        r = self.config.init_range
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                    m.weight[m.padding_idx].zero_()

    # ------------------------------------------------------------------ encoding
    def nodes(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """bool ``(B, L)``: content words (the word graph's vertices, the words that can be salient)."""
        return self.content[src] & mask

    def encode_source(self, src: torch.Tensor, src_mask: torch.Tensor) -> MALEncoded:
        """Encode a ``(B, M, N)`` batch: h^e, the saliency attentions and eq. (17)'s constant part.

        (:meth:`encode` is the same here; the registered family,
        :class:`~.family.MALFamily`, overrides ``encode`` with the family interface's.)"""
        flat, mask = flatten_source(src, src_mask, self.config.max_src_len)  # (B, L)
        x = self.src_embedding(flat) * mask.unsqueeze(-1).to(self.src_embedding.weight.dtype)  # (B, L, k_e)
        h = self.encoder(x, mask)  # (B, L, 2k_h)
        nodes = self.nodes(flat, mask)
        bias = self.w_top.bias.expand(flat.shape[0], -1)  # (B, k_h)
        sal = graph = None
        if self.supervised is not None and self.w_cs is not None:
            sal = self.supervised(x, h, mask)
            bias = bias + self.w_cs(sal.context)
        if self.unsupervised is not None and self.w_cu is not None:
            graph = self.unsupervised(x, nodes)
            bias = bias + self.w_cu(graph.context)
        return MALEncoded(flat, mask, self.decoder.memory(h, mask), mean_state(h, mask), bias, sal, graph, nodes)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Any:
        """:meth:`encode_source`."""
        return self.encode_source(src, src_mask)

    def integrate(self, top: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """h^a (eq. 17) from h^{d2} ``(..., S)`` and the per-document ``bias`` ``(..., k_h)``."""
        return torch.tanh(F.linear(top, self.w_top.weight) + bias)

    def logits(self, top: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """W^d_hy h^a + b^d_hy ``(..., V)``: the logits of eq. (18)."""
        out: torch.Tensor = self.out(self.integrate(top, bias))
        return out

    def labels(self, enc: MALEncoded, tgt: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """The saliency labels r ``(B, L)`` (0/1): content words of the flat source that occur among
        the real target ids (:mod:`scg_summarize.data.saliency_labels`; ``<unk>`` never matches)."""
        hit = (enc.src.unsqueeze(2) == tgt.unsqueeze(1)) & tgt_mask.unsqueeze(1)  # (B, L, T)
        return (enc.nodes & hit.any(-1)).to(enc.memory.states.dtype)

    def saliency_maps(self, batch: SourceBatch) -> SaliencyMaps:
        """a^s (``SuAtt``) and a^u (``UnAtt``, ``-inf`` outside the word graph) over the flat source,
        as :class:`~scg_summarize.models.common.saliency_maps.SaliencyMaps` (the Table 4 analysis), with
        a reference point that needs no model: ``Lead``, the document's first content words
        (−position on the content words, ``-inf`` elsewhere)."""
        enc = self.encode_source(batch.src, batch.src_mask)
        maps: dict[str, torch.Tensor] = {}
        if enc.saliency is not None:
            maps["SuAtt"] = enc.saliency.weights
        if enc.graph is not None:
            maps["UnAtt"] = enc.graph.weights.masked_fill(~enc.nodes, float("-inf"))
        position = torch.arange(enc.src.shape[1], device=enc.src.device, dtype=torch.float32)
        maps["Lead"] = (-position).expand(enc.src.shape).masked_fill(~enc.nodes, float("-inf"))
        return SaliencyMaps(enc.src, enc.mask, maps)

    # ------------------------------------------------------------------ teacher forcing
    def teacher_terms(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor
    ) -> MALTerms:
        """Every term of eq. (19-21) of a batch under teacher forcing (``tgt`` ``(B, T)`` starts with ``<s>``)."""
        enc = self.encode_source(src, src_mask)
        y_in = self.tgt_embedding(tgt[:, :-1])  # (B, T-1, k_e)
        y_out, out_mask = tgt[:, 1:], tgt_mask[:, 1:]  # (B, T-1)
        dec = self.decoder(y_in, out_mask, enc.memory, enc.h0)  # h^{d2} (B, T-1, S)
        logits = self.logits(dec.top, enc.bias.unsqueeze(1))  # (B, T-1, V)
        nll = F.cross_entropy(logits.flatten(0, 1), y_out.flatten(), reduction="none").view_as(y_out)
        nll = nll * out_mask.to(nll.dtype)  # (B, T-1), 0 at padding
        loss_s = nll.new_zeros(nll.shape[0])
        entropy_s = entropy_u = label_rate = None
        if enc.saliency is not None:
            labels = self.labels(enc, tgt, tgt_mask)
            loss_s = saliency_loss(enc.saliency.logits, labels, enc.mask)  # (B,)
            entropy_s = float(normalized_entropy(enc.saliency.weights.detach(), enc.mask).mean())
            label_rate = float(labels.sum() / enc.mask.sum().clamp(min=1))
        if enc.graph is not None:
            entropy_u = float(normalized_entropy(enc.graph.weights.detach(), enc.nodes).mean())
        return MALTerms(enc, dec.attention, nll, out_mask, loss_s, entropy_s, entropy_u, label_rate)

    def forward(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor
    ) -> MALOutput:
        """L = L_s + L_NLL (eq. 19-21) of a batch (``tgt`` ``(B, T)`` starts with ``<s>``)."""
        terms = self.teacher_terms(src, src_mask, tgt, tgt_mask)
        doc_nll = terms.nll.sum(-1)  # L_NLL per document (eq. 20), (B,)
        loss = (terms.loss_s + doc_nll).mean()  # eq. (21), averaged over documents
        return MALOutput(
            loss,
            doc_nll.sum(),
            terms.loss_s.mean(),
            int(terms.out_mask.sum()),
            terms.entropy_s,
            terms.entropy_u,
            terms.label_rate,
        )
