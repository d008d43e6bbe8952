"""Initializing embeddings from word2vec vectors in the text format.

The format (word2vec's ``-binary 0`` output, also GloVe's without the header): an optional
header line ``<count> <dim>``, then one line per word, ``word v_1 ... v_dim``. Words of the
vocabulary that the file has get its vector; the others keep their initialization.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

__all__ = ["load_word2vec"]


def load_word2vec(path: str | Path, tokens: list[str], embeddings: list[nn.Embedding]) -> int:
    """Copy the vectors of ``path`` into every table of ``embeddings`` (rows by ``tokens``; a table
    smaller than the vocabulary covers its first words, as Paulus's target table covers the first
    ``tgt_vocab_size``, and gets the vectors of those).

    Returns the number of vocabulary words found. Raises ``ValueError`` when the vector size
    differs from the tables' or a line is malformed.
    """
    index = {tok: i for i, tok in enumerate(tokens)}
    dims = {e.embedding_dim for e in embeddings}
    if len(dims) != 1:
        raise ValueError(f"embedding tables of different sizes: {sorted(dims)}")
    dim = dims.pop()
    found = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip().split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                if int(parts[1]) != dim:
                    raise ValueError(f"{path}: vectors have {parts[1]} dimensions, the model {dim}")
                continue
            if len(parts) < 2:
                continue
            if len(parts) != dim + 1:
                raise ValueError(f"{path}:{lineno}: expected a word and {dim} numbers, got {len(parts) - 1}")
            row = index.get(parts[0])
            if row is None or row == 0:
                continue
            vector = torch.tensor([float(v) for v in parts[1:]])
            with torch.no_grad():
                for e in embeddings:
                    if row < e.num_embeddings:
                        e.weight[row] = vector.to(e.weight.dtype)
            found += 1
    return found
