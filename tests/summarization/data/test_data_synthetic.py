"""The synthetic corpus: determinism, the known salient chunk, and its prepared form."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scg_summarize.data.dataset import SummarizationDataset
from scg_summarize.data.storage import read_meta
from scg_summarize.data.synthetic import (
    SyntheticConfig,
    generate_examples,
    make_lexicon,
    make_synthetic_corpus,
)

from ..conftest import SYNTHETIC_SPLITS

CONFIG = SyntheticConfig()


def test_lexicon_is_made_up_and_sized() -> None:
    lexicon = make_lexicon(CONFIG, seed=0)
    words = [*lexicon.content, *lexicon.synonyms.values(), *lexicon.markers, *lexicon.fillers]
    assert len(set(words)) == len(words) == lexicon.size
    assert 300 <= lexicon.size <= 500
    assert all(re.fullmatch(r"[a-z]{3,}", w) for w in words)
    assert len(lexicon.synonyms) == CONFIG.synonym_words
    assert make_lexicon(CONFIG, seed=0) == lexicon and make_lexicon(CONFIG, seed=1) != lexicon


def test_a_caller_changing_its_lexicon_leaves_the_memoised_one_intact() -> None:
    lexicon = make_lexicon(CONFIG, seed=5)
    expected = dict(lexicon.synonyms)
    lexicon.synonyms.clear()
    assert make_lexicon(CONFIG, seed=5).synonyms == expected


def test_generation_is_deterministic() -> None:
    first = list(generate_examples(20, CONFIG, seed=3))
    assert first == list(generate_examples(20, CONFIG, seed=3))
    assert first != list(generate_examples(20, CONFIG, seed=4))
    assert first != list(generate_examples(20, CONFIG, seed=3, stream=1))


def test_the_summary_restates_the_salient_chunk() -> None:
    lexicon = make_lexicon(CONFIG, seed=0)
    back = {syn: word for word, syn in lexicon.synonyms.items()}
    markers, fillers = set(lexicon.markers), set(lexicon.fillers)
    positions, overlap_salient, overlap_other = [], [], []
    for example in generate_examples(300, CONFIG, seed=0):
        chunks = [s.split() for s in example.source]
        assert len(chunks) == CONFIG.num_chunks and example.sentences_given
        assert all(CONFIG.min_chunk_words <= len(c) < CONFIG.chunk_len for c in chunks)
        with_marker = [i for i, c in enumerate(chunks) if markers & set(c)]
        assert with_marker == [example.salient]
        assert len(example.references) == CONFIG.num_refs
        for ref in example.references:
            words = ref.split()
            assert CONFIG.min_summary <= len(words) <= CONFIG.max_summary
            content = [back.get(w, w) for w in words if w not in fillers]
            salient = set(chunks[example.salient])
            assert set(content) <= salient  # every non-noise word comes from the salient chunk
            assert not markers & set(words)
        target = {back.get(w, w) for w in example.references[0].split()} - fillers
        others = [set(c) for i, c in enumerate(chunks) if i != example.salient]
        overlap_salient.append(len(target & set(chunks[example.salient])) / len(target))
        overlap_other.append(float(np.mean([len(target & o) / len(target) for o in others])))
        positions.append(example.salient)
    assert np.mean(overlap_salient) == 1.0 and np.mean(overlap_other) < 0.1
    counts = np.bincount(positions, minlength=CONFIG.num_chunks)
    assert counts.min() > 15  # the salient chunk is spread over all positions


def test_corpus_in_prepared_format(synthetic_corpus: Path) -> None:
    meta = read_meta(synthetic_corpus)
    assert {k: v["examples"] for k, v in meta["splits"].items()} == SYNTHETIC_SPLITS
    assert meta["options"]["layout"] == "sentences"
    lexicon = meta["synthetic"]["lexicon"]
    dataset = SummarizationDataset(synthetic_corpus, "train")
    marker_ids = {dataset.vocab.token_to_id(m) for m in lexicon["markers"]}
    assert dataset.vocab.unk_id not in marker_ids
    for i in range(0, 240, 17):
        item = dataset[i]
        rows = [r for r in range(8) if marker_ids & set(item.src[r].tolist())]
        assert rows == [item.salient]
        assert item.src_sentences[item.salient].split() == dataset.vocab.decode(item.src[item.salient].tolist())
        assert dataset.vocab.decode(item.tgt.tolist()) == item.refs[0].split()
    assert 300 <= len(dataset.vocab) <= 510


def test_custom_shape_and_validation(tmp_path: Path) -> None:
    meta = make_synthetic_corpus(tmp_path / "s", 20, 0, 5, num_chunks=5, chunk_len=12, seed=1)
    assert set(meta["splits"]) == {"train", "test"}
    dataset = SummarizationDataset(tmp_path / "s", "test")
    assert dataset[0].src.shape == (5, 12)
    with pytest.raises(ValueError, match="num_chunks"):
        SyntheticConfig(num_chunks=1)
    with pytest.raises(ValueError, match="min_chunk_words"):
        SyntheticConfig(chunk_len=5)
