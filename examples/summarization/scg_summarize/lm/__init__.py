"""Count-based language models (the n-gram rows of Rush et al. 2015, Table 2).

=============== ==========================================================================
``kneser_ney``  :class:`KneserNeyLM`: interpolated Kneser-Ney n-grams, perplexity
=============== ==========================================================================
"""

from .kneser_ney import BOS, EOS, UNK, KneserNeyLM

__all__ = ["BOS", "EOS", "UNK", "KneserNeyLM"]
