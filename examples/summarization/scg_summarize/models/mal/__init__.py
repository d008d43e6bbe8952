"""MAL: saliency estimation with multi-attention learning (Li, Bing, Wei & Lam).

Self-contained parts, equation numbers of the paper (see ``docs/mal.md``):

================ ===========================================================================
``config``       :class:`MALConfig`, the ablation rows seq2seq / +SuAtt / +UnAtt / +MAL
``gru``          the GRU of eq. (1) and its masked scan
``encoder``      the bidirectional GRU (eq. 2-3) and the self-attention (eq. 4-6)
``saliency``     supervised attention: classifier, a^s, c^s (eq. 7-9), L_s (eq. 19)
``pagerank``     unsupervised attention: word graph, closed-form PageRank, a^u, c^u (eq. 10-13)
``cgru``         the two-layer conditional GRU decoder (eq. 14-16)
``model``        :class:`MALSummarizer`: integration (eq. 17), softmax (eq. 18), L (eq. 20-21)
``step``         the step-decoder adapter (beam search) and run directories
``family``       :class:`~.family.MALFamily`, the registered family (the trainer's interface)
``train``        a small trainer (Adadelta) writing per-term losses and attention entropies
``conditioning`` how often the literal PageRank system is ill-conditioned on real text
================ ===========================================================================

``family`` (not imported here; the registry loads it) registers :class:`~.family.MALFamily` as
``model.family = "mal"`` for ``scg-summarize train``/``evaluate``; the small stand-alone trainer
(:mod:`scg_summarize.train.mal`) and ``decoder.json`` run directories remain for the
measurements of ``docs/mal.md``.
"""

from .cgru import ConditionalGRU, DecoderMemory
from .config import ABLATIONS, PAGERANK_GUARDS, MALConfig
from .encoder import BiGRUEncoder, SelfAttention
from .gru import EqOneGRUCell, gru_scan
from .model import MALEncoded, MALOutput, MALSummarizer, flatten_source
from .pagerank import PageRankError, UnsupervisedAttention, closed_form_pagerank, pagerank_system, word_graph
from .saliency import SupervisedAttention, normalized_entropy, saliency_loss
from .step import MALStepDecoder, load_mal_checkpoint, load_mal_run, save_mal_run

__all__ = [
    "ABLATIONS",
    "PAGERANK_GUARDS",
    "BiGRUEncoder",
    "ConditionalGRU",
    "DecoderMemory",
    "EqOneGRUCell",
    "MALConfig",
    "MALEncoded",
    "MALOutput",
    "MALStepDecoder",
    "MALSummarizer",
    "PageRankError",
    "SelfAttention",
    "SupervisedAttention",
    "UnsupervisedAttention",
    "closed_form_pagerank",
    "flatten_source",
    "gru_scan",
    "load_mal_checkpoint",
    "load_mal_run",
    "normalized_entropy",
    "pagerank_system",
    "saliency_loss",
    "save_mal_run",
    "word_graph",
]
