"""MAL (Li, Bing, Wei & Lam) as the ``mal`` model family: encoder, saliency attentions, cGRU
decoder, the multi-attention integration (eq. 17), the output softmax (eq. 18) and the terms of
the objective (eq. 19-21).

::

    h^a_t = tanh(W^d_ha h^{d2}_t + W^d_{c^s a} c^s + W^d_{c^u a} c^u + b^d_ha)      (17)
    ŷ_t = softmax(W^d_hy h^a_t + b^d_hy)                                          (18)
    L_NLL = −Σ_t log p(y_t | y_<t, X)                                              (20)
    L = L_s + L_NLL                                                                (21)

L_s (eq. 19) is the supervised attention's per-word cross-entropy (:mod:`.saliency`). The
ablation rows (:data:`~.config.ABLATIONS`) drop c^s (and L_s) or c^u from eq. (17).

:class:`MALSummarizer` is a :class:`~scg_summarize.models.family.SummarizerFamily` (``scg-summarize
train --config MAL``, ``--resume``, ``best.pt`` selection, ``evaluate``, beam search):

* ``encode(src, src_mask) -> (memory, h0)``: the source as one flat sequence (the prepared
  ``(B, M, N)`` chunk grid with its padding moved to the end, `pack_words`, cut to
  ``max_src_len`` words) in a one-chunk :class:`~scg_summarize.models.common.attention.Memory`
  (``words`` = h^e ``(B, 1, L, 2k_h)``) with the attention keys and eq. (17)'s constant part
  W c^s + W c^u + b in ``memory.extra``, so beam search reorders them with the rest;
* ``init_state`` / ``advance``: the two cGRU states (eq. 14-16) in a
  :class:`~scg_summarize.models.common.decoder.DecoderState` (``h = [h^{d1}, h^{d2}]``); ``advance``
  returns h^a_t (eq. 17), so the generator is the plain softmax of eq. (18) and beam search may
  fuse it with its top-k;
* ``forward(..., task="teacher")``: a :class:`MALTeacherOutput`, the per-step NLL (L_NLL,
  eq. 20) plus L_s per document (eq. 19) and the attention entropies, which the ``mal``
  objective (:mod:`scg_summarize.train.mal_objective`) turns into L = L_s + L_NLL (eq. 21),
  averaged over the batch; ``task="rollout"``: one scg word node per step.

Which vocabulary words are content words (the saliency labels, the word graph's vertices) is a
buffer (:class:`~scg_summarize.data.saliency_labels.ContentWords`): the trainer fills it with
:meth:`MALSummarizer.bind_vocab` before the first step and a checkpoint carries it, so decoding
needs no stopword list.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...data.batching import SourceBatch, SourceLengths
from ...data.chunking import pack_words
from ...data.saliency_labels import ContentWords, load_stopwords
from ...data.vocab import Vocab
from ..common.attention import AttentionOut, Memory, Mode
from ..common.decoder import DecoderState
from ..common.generator import Generator
from ..common.saliency_maps import SaliencyMaps
from ..family import SummarizerFamily, SummarizerOutput, embedding_tables
from ..registry import FAMILIES
from .cgru import ConditionalGRU, DecoderMemory, mean_state
from .config import MALConfig
from .encoder import BiGRUEncoder
from .pagerank import UnsupervisedAttention, UnsupervisedOut
from .saliency import SaliencyOut, SupervisedAttention, normalized_entropy, saliency_loss

__all__ = ["MALEncoded", "MALSummarizer", "MALTeacherOutput"]


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
class MALTeacherOutput(SummarizerOutput):
    """The trainer's teacher-forced output plus MAL's other terms.

    Attributes:
        loss_s: L_s per document ``(B,)`` (eq. 19; zeros without +SuAtt).
        entropy_s / entropy_u: mean normalized entropy of a^s / a^u (1 = uniform; None when off).
        label_rate: fraction of source words labelled salient (None without +SuAtt).
    """

    loss_s: torch.Tensor | None = None
    entropy_s: float | None = None
    entropy_u: float | None = None
    label_rate: float | None = None

    def document_terms(self) -> dict[str, torch.Tensor]:
        """L_s summed over the documents; the batch means (the entropies, the label rate) times
        its documents (the label rate is a rate over words: weighted by documents, as the
        ``train`` lines average it over steps); a term that is off is left out."""
        docs = self.step_mask.shape[0]
        out: dict[str, torch.Tensor] = {}
        if self.loss_s is not None:
            out["loss_s"] = self.loss_s.detach().sum()
        for name, mean in (
            ("entropy_s", self.entropy_s),
            ("entropy_u", self.entropy_u),
            ("label_rate", self.label_rate),
        ):
            if mean is not None:
                out[name] = torch.tensor(mean * docs, dtype=torch.float64)
        return out


class _OutputLayer(Generator):
    """Eq. (18) as a generator: softmax(W^d_hy h^a + b^d_hy) over the model's ``out`` layer
    (held by reference, so the state dict keeps MAL's names)."""

    copies = False

    def __init__(self, owner: MALSummarizer) -> None:
        super().__init__()
        self._owner = [owner]  # a list: not a submodule

    def output_layer(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self._owner[0].out
        return out.weight, out.bias

    def forward(self, out: torch.Tensor, att: AttentionOut | None, memory: Memory | None) -> torch.Tensor:
        return F.log_softmax(self.logits(out), dim=-1)


class MALSummarizer(SummarizerFamily[MALConfig, DecoderState]):
    """The ``mal`` family: seq2seq, +SuAtt, +UnAtt or +MAL (``model.suatt`` / ``model.unatt``).

    Args:
        config: the ``[model]`` table (``vocab_size`` set; ``emb_dim`` = k_e, ``hidden`` = k_h).
    """

    default_objective = "mal"  # L = L_s + L_NLL
    output_terms = ("loss_s", "entropy_s", "entropy_u", "label_rate")  # (`MALTeacherOutput.document_terms`)
    content: torch.Tensor  #: bool ``(V,)``: the vocabulary's content words (labels and graph vertices)

    def __init__(self, config: MALConfig) -> None:
        super().__init__()
        if config.vocab_size < 5:
            raise ValueError("model.vocab_size must be set (the corpus vocabulary size)")
        self.config = config
        V, E, H = config.vocab_size, config.emb_dim, config.hidden
        S = 2 * H
        self.register_buffer("content", torch.zeros(V, dtype=torch.bool))
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
        self.generator = _OutputLayer(self)

    @classmethod
    def for_vocab(cls, config: MALConfig, vocab: Vocab) -> MALSummarizer:
        """A model for ``vocab`` (fills ``config.vocab_size``; content words as `bind_vocab`)."""
        if config.vocab_size == 0:
            config.vocab_size = len(vocab)
        model = cls(config)
        model.bind_vocab(vocab)
        return model

    def reset_parameters(self) -> None:
        """Uniform in [−r, r] (r = ``init_range``); padding embeddings zero."""
        r = self.config.init_range
        for p in self.parameters():
            nn.init.uniform_(p, -r, r)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                    m.weight[m.padding_idx].zero_()

    def word_embeddings(self) -> list[nn.Embedding]:
        """The source and target embeddings (once when shared)."""
        return embedding_tables(self.src_embedding, self.tgt_embedding)

    def bind_vocab(self, vocab: Vocab) -> None:
        """Mark the content words of ``vocab`` (stopwords from ``model.stopwords``)."""
        if len(vocab) != self.config.vocab_size:
            raise ValueError(f"model.vocab_size is {self.config.vocab_size} but the vocabulary has {len(vocab)} words")
        self.content.copy_(ContentWords(vocab, load_stopwords(self.config.stopwords)).table.to(self.content.device))

    def _check_bound(self) -> None:
        if self.training and (self.config.suatt or self.config.unatt) and not bool(self.content.any()):
            raise ValueError(
                "MAL: no content words are known (the saliency labels and the word graph need them); "
                "call model.bind_vocab(vocab) before training (scg-summarize train does)"
            )

    # ------------------------------------------------------------------ encoding
    def nodes(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """bool ``(B, L)``: content words (the word graph's vertices, the words that can be salient)."""
        return self.content[src] & mask

    def encode_source(self, src: torch.Tensor, src_mask: torch.Tensor) -> MALEncoded:
        """Encode a ``(B, M, N)`` batch: h^e, the saliency attentions and eq. (17)'s constant part
        (`encode` puts them in the family interface's `Memory`)."""
        flat, mask, _ = pack_words(src, src_mask, self.config.max_src_len)  # (B, L)
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

    def integrate(self, top: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """h^a (eq. 17) from h^{d2} ``(..., S)`` and the per-document ``bias`` ``(..., k_h)``."""
        return torch.tanh(F.linear(top, self.w_top.weight) + bias)

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

    # ------------------------------------------------------------------ the family interface
    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor, lengths: SourceLengths | None = None
    ) -> tuple[Memory, torch.Tensor]:
        """The memory (h^e as one chunk, with the keys and eq. 17's constant part) and h0. (MAL's
        encoder reads the packed words whole: ``lengths`` is not used.)"""
        self._check_bound()
        enc = self.encode_source(src, src_mask)
        states, mask = enc.memory.states, enc.memory.mask  # (B, L, S), (B, L)
        extra = {"keys": enc.memory.keys, "bias": enc.bias}  # (B, L, A), (B, k_h)
        memory = Memory.build(states.unsqueeze(1), mask.unsqueeze(1), None, enc.src.unsqueeze(1), extra)
        return memory, enc.h0

    def init_state(self, memory: Memory, final: torch.Tensor) -> DecoderState:
        """h^{d1}_0 = h^{d2}_0 = the mean encoder state."""
        return DecoderState([final, final], [], final)

    def advance(
        self, state: DecoderState, prev_tokens: torch.Tensor, memory: Memory, t: int, mode: Mode
    ) -> tuple[torch.Tensor, DecoderState, AttentionOut]:
        """Eq. (14-17) for every row: returns h^a_t ``(B, k_h)``."""
        dec_memory = DecoderMemory(memory.words[:, 0], memory.word_mask[:, 0], memory.extra["keys"])
        y = self.tgt_embedding(prev_tokens)  # (B, k_e)
        h1, h2, weights = self.decoder.step(y, state.h[0], state.h[1], dec_memory)  # (B, S), (B, S), (B, L)
        out = self.integrate(h2, memory.extra["bias"])  # h^a_t (B, k_h)
        return out, DecoderState([h1, h2], [], h2), _attention_out(weights, memory)

    def step_log_probs(self, out: torch.Tensor, att: AttentionOut, memory: Memory) -> torch.Tensor:
        """log p(y_t) ``(B, V)`` (eq. 18)."""
        log_probs: torch.Tensor = self.generator(out, att, memory)
        return log_probs

    def teacher_forcing(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor,
        mode: Mode,
        lengths: SourceLengths | None = None,
    ) -> MALTeacherOutput:
        """Every term of eq. (19-21) of a batch (``tgt`` ``(B, T)`` starts with ``<s>``): the
        per-step NLL with L_s and the saliency statistics."""
        self._check_bound()
        enc = self.encode_source(src, src_mask)
        y_in = self.tgt_embedding(tgt[:, :-1])  # (B, T-1, k_e)
        y_out, out_mask = tgt[:, 1:], tgt_mask[:, 1:]  # (B, T-1)
        dec = self.decoder(y_in, out_mask, enc.memory, enc.h0)  # h^{d2} (B, T-1, S)
        logits = self.out(self.integrate(dec.top, enc.bias.unsqueeze(1)))  # (B, T-1, V), eq. (18)
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
        # the per-step attention is for statistics only (validation): no graph behind it
        memory = Memory.build(enc.memory.states.detach().unsqueeze(1), enc.mask.unsqueeze(1), None)
        steps = nll.shape[1]
        weights = dec.attention.detach()  # (B, T-1, L)
        atts = [_attention_out(weights[:, t], memory) for t in range(steps)]
        return MALTeacherOutput(
            [nll[:, t] for t in range(steps)], out_mask, atts, loss_s, entropy_s, entropy_u, label_rate
        )


def _attention_out(weights: torch.Tensor, memory: Memory) -> AttentionOut:
    """A step's decoder attention a^d_t ``(B, L)`` in the family interface's terms: one chunk,
    read whole (``words_read`` = the document's words), a^d as the word distribution."""
    B = weights.shape[0]
    one = weights.new_ones(B, 1)
    words = weights.view(B, 1, -1)
    context = torch.bmm(weights.unsqueeze(1), memory.words[:, 0]).squeeze(1)  # c^d_t (B, S)
    return AttentionOut(context, one, one, memory.chunk_sizes.sum(1), read_weights=words, word_probs=words)


FAMILIES.register("mal", MALSummarizer, config=MALConfig)
