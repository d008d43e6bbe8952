"""MAL: saliency estimation with multi-attention learning (Li, Bing, Wei & Lam).

Self-contained parts, equation numbers of the paper (see ``docs/mal.md``):

================ ===========================================================================
``config``       :class:`MALConfig`, the ablation rows seq2seq / +SuAtt / +UnAtt / +MAL
``gru``          the GRU of eq. (1) and its masked scan
``encoder``      the bidirectional GRU (eq. 2-3) and the self-attention (eq. 4-6)
``saliency``     supervised attention: classifier, a^s, c^s (eq. 7-9), L_s (eq. 19)
``pagerank``     unsupervised attention: word graph, closed-form PageRank, a^u, c^u (eq. 10-13)
``cgru``         the two-layer conditional GRU decoder (eq. 14-16)
``model``        :class:`MALSummarizer`, the registered ``mal`` family: integration (eq. 17),
                 softmax (eq. 18), the terms of L (eq. 19-21)
``conditioning`` how often the literal PageRank system is ill-conditioned on real text
================ ===========================================================================

``model`` registers :class:`MALSummarizer` as ``model.family = "mal"``: MAL trains through
``scg-summarize train --config MAL`` (an ordinary run directory) and decodes through the one step
adapter of every family (:class:`scg_summarize.decoding.ModelStepDecoder`).
"""

from .cgru import ConditionalGRU, DecoderMemory
from .config import ABLATIONS, PAGERANK_GUARDS, MALConfig
from .encoder import BiGRUEncoder, SelfAttention
from .gru import EqOneGRUCell, bigru_scan, gru_scan
from .model import MALEncoded, MALSummarizer, MALTeacherOutput
from .pagerank import PageRankError, UnsupervisedAttention, closed_form_pagerank, pagerank_system, word_graph
from .saliency import SupervisedAttention, normalized_entropy, saliency_loss

__all__ = [
    "ABLATIONS",
    "PAGERANK_GUARDS",
    "BiGRUEncoder",
    "ConditionalGRU",
    "DecoderMemory",
    "EqOneGRUCell",
    "MALConfig",
    "MALEncoded",
    "MALSummarizer",
    "MALTeacherOutput",
    "PageRankError",
    "SelfAttention",
    "SupervisedAttention",
    "UnsupervisedAttention",
    "bigru_scan",
    "closed_form_pagerank",
    "gru_scan",
    "normalized_entropy",
    "pagerank_system",
    "saliency_loss",
    "word_graph",
]
