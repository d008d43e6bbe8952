"""Word saliency maps: what a model that scores its source words returns for analysis.

:class:`SaliencyMaps` holds named saliency vectors over a batch's source tokens. MAL
(:meth:`scg_summarize.models.mal.MALSummarizer.saliency_maps`) returns its supervised (a^s) and
unsupervised (a^u) attentions; :mod:`scg_summarize.evaluation.saliency_topk` turns any such maps
into the top-k-words ROUGE analysis of Li et al.'s Table 4.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SaliencyMaps"]


@dataclass
class SaliencyMaps:
    """Saliency vectors over a batch's source tokens.

    Attributes:
        ids: long ``(B, L)`` source ids (the positions the vectors score).
        mask: bool ``(B, L)``, real positions.
        maps: name -> float ``(B, L)`` saliency (higher = more salient; ``-inf`` = not eligible).
    """

    ids: torch.Tensor
    mask: torch.Tensor
    maps: dict[str, torch.Tensor]
