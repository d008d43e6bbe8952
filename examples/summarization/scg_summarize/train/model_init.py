"""The model a run starts from: the family's model for the corpus (`build_model`), then
``train.word2vec`` embeddings or the weights of ``train.init_from`` (+PRETRAIN) (`initial_model`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..data.vocab import Vocab
from ..models.family import SummarizerFamily
from ..models.loading import check_same_model, check_vocabulary, read_checkpoint
from ..models.registry import FAMILIES
from ..models.registry import build_model as build_family
from .config import Config

__all__ = ["build_model", "initial_model"]


def build_model(
    config: Config, vocab_size: int, num_chunks: int, data_dir: str | Path | None = None
) -> SummarizerFamily[Any, Any]:
    """The model of the configured family (`FAMILIES`) for a corpus with ``vocab_size`` words and ``num_chunks`` chunks
    (the family's ``for_corpus(config, data_dir)`` when it has one and ``data_dir`` is given)."""
    if config.model.vocab_size == 0:
        config.model.vocab_size = vocab_size
    elif config.model.vocab_size != vocab_size:  # (the ids index the embeddings: a smaller table fails inside)
        raise ValueError(
            f"model.vocab_size = {config.model.vocab_size}, but the corpus vocabulary has {vocab_size} words; "
            "leave model.vocab_size at 0 (it is read from the corpus)"
        )
    chunks = config.data.regrid[0] if config.data.regrid else num_chunks
    if config.model.num_chunks == 0:
        config.model.num_chunks = chunks
    elif config.model.num_chunks != chunks:  # (the +POS table's size; a number no part of the model reads else)
        where = "data.regrid gives" if config.data.regrid else "the corpus has"
        raise ValueError(
            f"model.num_chunks = {config.model.num_chunks}, but {where} {chunks} chunks per document; "
            "leave model.num_chunks at 0 (it is read from the corpus, or data.regrid)"
        )
    if data_dir is not None:
        return FAMILIES.get(config.model.family).for_corpus(config.model, data_dir)
    return build_family(config.model)


def initial_model(
    config: Config,
    vocab: Vocab,
    num_chunks: int,
    data_dir: Path,
    device: torch.device,
    *,
    resume: bool,
    info: Callable[[str], None],
) -> SummarizerFamily[Any, Any]:
    """The family's model for the corpus, on ``device``, with ``train.word2vec`` embeddings or the
    weights of ``train.init_from`` (+PRETRAIN) when a new run (not ``resume``) asks for them."""
    tc = config.train
    model = build_model(config, len(vocab), num_chunks, data_dir).to(device)
    model.bind_vocab(vocab)  # a family that needs the words (MAL's stopwords)
    if tc.word2vec:
        from ..models.common.pretrained import load_word2vec

        tables = model.word_embeddings()
        if not tables:
            raise ValueError(
                f"train.word2vec: the {config.model.family!r} family has no word embedding tables for it "
                f"({type(model).__name__}.word_embeddings() is empty); leave train.word2vec empty"
            )
        found = load_word2vec(tc.word2vec, vocab.tokens, tables)
        info(f"word2vec: {found}/{len(vocab)} vocabulary words initialized from {tc.word2vec}")
    if tc.pretrain and not tc.init_from and not resume:
        raise ValueError(
            f"{config.name} starts from a trained model (train.pretrain): pass --set train.init_from=RUN/best.pt "
            "(a run of the same family and model sizes: HIER for +PRETRAIN, PAULUS-ML for PAULUS-RL)"
        )
    if tc.init_from and not resume:
        state = read_checkpoint(tc.init_from, map_location=device)
        try:
            check_vocabulary(state, vocab, tc.init_from, f"the corpus {data_dir}")
        except ValueError as err:
            raise ValueError(f"train.init_from: {err}") from None
        check_same_model(model, state["model"], tc.init_from)
        info(f"initialized from {tc.init_from}")
    return model
