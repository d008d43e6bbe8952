"""Word saliency labels for MAL's supervised attention (Li et al., Section 2.2).

"The words in the source text (except the stopwords) that appear in the ground truth summaries
are annotated with the positive label 1. All other words and the punctuations are annotated
with the negative label 0." A source token gets 1 when it is a *content word* and occurs in
the reference (compared lowercased, token by token, after the corpus's own tokenization):

* a content word is not a stopword, not punctuation (a token without any letter or digit:
  ``,``, ``--``, ``-lrb-`` is a word, but ``#.#`` is not) and not a special token (``<pad>``,
  ``<unk>``, ``<s>``, ``</s>``);
* the stopwords are the list of the maintained ``stop-words`` package (PyPI ``stop-words``,
  shipped as package data; in the ``summarize`` extra), never a list typed into this
  repository. :func:`load_stopwords` names the missing package when it is absent.

The same content-word test gives the vertex set of the unsupervised attention's word graph
("we take the nonstop words as the vertex set").

Two levels: :func:`saliency_labels` on token lists (any reference text), and
:class:`ContentWords` on vocabulary ids for batches (the training target is the reference;
``<unk>`` never matches).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import torch

from .vocab import SPECIALS, Vocab

__all__ = ["ContentWords", "is_content_word", "is_punctuation", "load_stopwords", "saliency_labels"]


@lru_cache(maxsize=8)
def load_stopwords(language: str = "en") -> frozenset[str]:
    """The ``stop-words`` package's list for ``language`` (lowercased).

    Raises ``ImportError`` naming the package when it is not installed, ``ValueError`` for a
    language it does not have.
    """
    try:
        from stop_words import AVAILABLE_LANGUAGES, LANGUAGE_MAPPING, get_stop_words
    except ImportError as err:  # pragma: no cover - the package is in the summarize extra
        raise ImportError(
            "MAL's saliency labels need the 'stop-words' package: pip install stop-words "
            "(or the project's 'summarize' extra)"
        ) from err
    known = set(AVAILABLE_LANGUAGES) | set(LANGUAGE_MAPPING)
    if language not in known:
        raise ValueError(
            f"stopwords: no list for language {language!r} in the stop-words package "
            f"(available: {', '.join(sorted(known))})"
        )
    return frozenset(word.lower() for word in get_stop_words(language))


def is_punctuation(token: str) -> bool:
    """A token without any letter or digit (``.``, ``--``, ``''``, ``#.#``)."""
    return not any(ch.isalnum() for ch in token)


def is_content_word(token: str, stopwords: frozenset[str]) -> bool:
    """Not a special token, not punctuation, not a stopword (compared lowercased)."""
    if token in SPECIALS or is_punctuation(token):
        return False
    low = token.lower()
    # the PTB tokenizer escapes brackets as words: -lrb-, -rrb-, -lsb-, -rsb-, -lcb-, -rcb-
    if len(low) == 5 and low[0] == "-" and low[-1] == "-" and low[1:4] in ("lrb", "rrb", "lsb", "rsb", "lcb", "rcb"):
        return False
    return low not in stopwords


def saliency_labels(source: Sequence[str], reference: Iterable[str], stopwords: frozenset[str]) -> list[int]:
    """r_i for every source token: 1 if it is a content word occurring in ``reference``, else 0.

    Args:
        source: the source tokens.
        reference: the reference summary's tokens (several references: pass them chained).
        stopwords: from :func:`load_stopwords`.
    """
    ref = {token.lower() for token in reference}
    return [int(is_content_word(token, stopwords) and token.lower() in ref) for token in source]


class ContentWords:
    """The content-word test over a vocabulary, for batches of ids.

    Args:
        vocab: the corpus vocabulary.
        stopwords: from :func:`load_stopwords`.
    """

    def __init__(self, vocab: Vocab, stopwords: frozenset[str]) -> None:
        flags = [is_content_word(vocab.id_to_token(i), stopwords) for i in range(len(vocab))]
        self.table = torch.tensor(flags, dtype=torch.bool)  # (V,)

    def mask(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """bool ``(B, L)``: real source positions holding a content word (the graph's vertices)."""
        table = self.table.to(src.device)
        return table[src.clamp(min=0, max=len(table) - 1)] & src_mask & (src < len(table))

    def labels(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor
    ) -> torch.Tensor:
        """r ``(B, L)`` (float 0/1): content words of ``src`` that occur among the real ``tgt`` ids."""
        content = self.mask(src, src_mask)  # (B, L)
        hit = (src.unsqueeze(2) == tgt.unsqueeze(1)) & tgt_mask.unsqueeze(1)  # (B, L, T)
        return (content & hit.any(-1)).float()
