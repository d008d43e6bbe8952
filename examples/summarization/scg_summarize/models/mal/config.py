"""MAL's hyperparameters (:class:`MALConfig`) and the four ablation rows of the paper's Table 1.

Li, Bing, Wei & Lam, *Saliency Estimation with Multi-Attention Learning for Abstractive Text
Summarization*. The rows differ only in which global attention contexts enter the integration
layer (eq. 17) and, for +SuAtt, in the auxiliary saliency loss L_s (eq. 19):

==========  ======================  ========================  =================================
row         supervised attention    unsupervised attention    objective
==========  ======================  ========================  =================================
seq2seq     --                      --                        L_NLL (eq. 20)
+SuAtt      c^s (eq. 7-9)           --                        L_s + L_NLL (eq. 21)
+UnAtt      --                      c^u (eq. 10-13)           L_NLL
+MAL        c^s                     c^u                       L_s + L_NLL
==========  ======================  ========================  =================================

Every row keeps h^a_t = tanh(W h^{d2}_t + [W c^s] + [W c^u] + b) (eq. 17) so that the rows
differ by the saliency contexts alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..config import ModelConfig, positive_ints

__all__ = ["ABLATIONS", "PAGERANK_GUARDS", "MALConfig"]

#: The paper's Table 1 rows: name -> (supervised attention, unsupervised attention).
ABLATIONS: dict[str, tuple[bool, bool]] = {
    "seq2seq": (False, False),
    "+SuAtt": (True, False),
    "+UnAtt": (False, True),
    "+MAL": (True, True),
}

#: How the word graph's edge weights are made safe for the closed-form PageRank (see
#: :mod:`.pagerank`): ``none`` is the paper (M_ij = x_iᵀ W^p x_j, any sign).
PAGERANK_GUARDS: tuple[str, ...] = ("none", "softplus", "abs")


@dataclass(kw_only=True, slots=True)
class MALConfig(ModelConfig):
    """Hyperparameters of :class:`~scg_summarize.models.mal.model.MALSummarizer` (the ``mal``
    family), with those of `ModelConfig` (``emb_dim`` = k_e, ``hidden`` = k_h; ``dropout`` is not used).

    The defaults are small (this machine) and the +MAL row; the paper's Gigaword sizes are
    ``emb_dim=300, hidden=500`` (Section 3.4), its damping ``d = 0.9`` and beam 10.

    Attributes:
        hidden: k_h, the size of each encoder GRU direction; encoder states h^e are 2 k_h and
            the decoder's states are 2 k_h too (it starts from their mean, Section 2.4).
        share_embeddings: one table for source and target words (ours; the paper does not say).
        suatt: supervised attention (eq. 4-9) and its loss L_s (eq. 19).
        unatt: unsupervised attention (eq. 10-13).
        damping: d of the PageRank (eq. 11).
        pagerank_guard: ``none`` (the paper's signed edge weights), ``softplus`` (M_ij =
            softplus(x_iᵀ W^p x_j) > 0) or ``abs`` (|x_iᵀ W^p x_j|); see :mod:`.pagerank`.
        temperature_s: τ_s in a^s = softmax(r̂ / τ_s) (1 = eq. 8 literally).
        temperature_u: τ_u in a^u = softmax(p' / τ_u) (1 = eq. 12 literally).
        scale_by_nodes: p' = m · p (m = number of graph nodes, so a uniform PageRank gives 1
            everywhere) instead of p' = p (eq. 12). Ours; off in the paper.
        max_src_len: source words read (the paper: 100 on Gigaword); the self-attention is
            quadratic in it.
        stopwords: the language of the ``stop-words`` package's list used for the saliency
            labels and the graph's vertex set.
    """

    family: str = "mal"
    emb_dim: int = 64
    hidden: int = 64
    share_embeddings: bool = True
    suatt: bool = True
    unatt: bool = True
    damping: float = 0.9
    pagerank_guard: str = "softplus"
    temperature_s: float = 1.0
    temperature_u: float = 1.0
    scale_by_nodes: bool = False
    max_src_len: int = 100
    stopwords: str = "en"

    def validate(self) -> None:
        """Raise ``ValueError`` naming the option for an inconsistent configuration."""
        ModelConfig.validate(self)
        positive_ints(self, "max_src_len")
        if not 0.0 < self.damping < 1.0:
            raise ValueError(f"model.damping must be in (0, 1), got {self.damping!r}")
        if self.pagerank_guard not in PAGERANK_GUARDS:
            raise ValueError(f"model.pagerank_guard must be one of {PAGERANK_GUARDS}, got {self.pagerank_guard!r}")
        for name in ("temperature_s", "temperature_u", "init_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"model.{name} must be a positive number, got {value!r}")
        for name in ("suatt", "unatt", "scale_by_nodes"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name} must be true or false, got {getattr(self, name)!r}")

    @property
    def ablation(self) -> str:
        """The Table 1 row this configuration is (``seq2seq``, ``+SuAtt``, ``+UnAtt``, ``+MAL``)."""
        return next(name for name, flags in ABLATIONS.items() if flags == (self.suatt, self.unatt))

    @classmethod
    def for_ablation(cls, name: str, **overrides: Any) -> MALConfig:
        """The configuration of Table 1 row ``name`` with ``overrides``."""
        if name not in ABLATIONS:
            raise ValueError(f"unknown MAL ablation {name!r} (known: {', '.join(ABLATIONS)})")
        suatt, unatt = ABLATIONS[name]
        return replace(cls(**overrides), suatt=suatt, unatt=unatt)
