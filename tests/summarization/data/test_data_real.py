"""The pipeline on small subsets of the real samples in ``../shared/data`` (skipped if absent).

Nothing from those files is stored in the repository; the tests read them in place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scg_summarize import cli
from scg_summarize.data.dataset import SummarizationDataset
from scg_summarize.data.options import PrepOptions
from scg_summarize.data.prepare import InputSource, prepare_corpus
from scg_summarize.data.preprocess import Preprocessor
from scg_summarize.data.readers import ReaderConfig, read_input
from scg_summarize.data.storage import read_meta
from scg_summarize.data.stories import find_story_files, parse_story

N_STORIES = 20


def _source(fmt: str, path: Path, split: str, config: ReaderConfig | None = None) -> InputSource:
    return InputSource(str(path), split, lambda report: read_input(fmt, path, config, report=report))


def _jsonl_rows(path: Path, n: int) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(n)]


def test_cnndm_stories_grid(shared_data: Path, tmp_path: Path) -> None:
    stories = shared_data / "cnndm-250" / "stories"
    options = PrepOptions()  # the paper's 10 x 40 grid
    meta = prepare_corpus([_source("cnndm", stories, "train")], tmp_path / "p", options, limit=N_STORIES)
    assert meta["splits"]["train"]["examples"] == N_STORIES
    assert meta["splits"]["train"]["src_unk_rate"] == 0.0
    dataset = SummarizationDataset(tmp_path / "p", "train")
    assert dataset[0].src.shape == (10, 40)
    pre = Preprocessor(options)
    for i, path in enumerate(find_story_files(stories)[:N_STORIES]):
        raw = parse_story(path)
        processed = pre(raw)
        item = dataset[i]
        words = [w for s in processed.sentence_tokens for w in [*s, "</s>"]][:400]
        assert (
            dataset.vocab.decode(item.src.reshape(-1).tolist(), strip_specials=False, stop_at_eos=False)[: len(words)]
            == words
        )
        assert item.refs == raw.references and len(item.refs) >= 1
        assert dataset.vocab.decode(item.tgt.tolist()) == pre.tokenize(raw.references[0])
        assert all(w == w.lower() and not any(c.isdigit() for c in w) for w in words)
        assert len(processed.sentences) >= len(raw.source)  # paragraphs were split further


def test_cnndm_jsonl_agrees_with_stories(shared_data: Path) -> None:
    path = shared_data / "cnndm-250" / "cnndm_test250.jsonl"
    config = ReaderConfig(target_field="reference", target_sep=" . ")
    examples = []
    for example in read_input("cnndm", path, config):
        examples.append(example)
        if len(examples) == N_STORIES:
            break
    for example in examples:
        story_id = example.id.rsplit("-", 1)[-1]
        story = parse_story(shared_data / "cnndm-250" / "stories" / f"{story_id}.story")
        assert example.id.startswith("dm-test-") or example.id.startswith("cnn-test-")
        assert len(example.references) == len(story.references)
        assert example.references[0].rstrip(" .") == story.references[0].rstrip(" .")
    sentences = ReaderConfig(source_field="article_sentences", target_field="reference")
    first = next(read_input("cnndm", path, sentences))
    assert first.sentences_given and len(first.source) > 5


def test_scitldr_sentences_and_multiple_references(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "scitldr-a" / "test.jsonl"
    options = PrepOptions(layout="sentences", num_chunks=6, chunk_len=30)
    prepare_corpus([_source("jsonl", path, "test")], tmp_path / "s", options, limit=40)
    dataset = SummarizationDataset(tmp_path / "s", "test")
    rows = _jsonl_rows(path, 40)
    assert len(dataset) == 40
    assert sum(len(r["target"]) > 1 for r in rows) > 20  # most test rows have several TLDRs
    for i, row in enumerate(rows):
        item = dataset[i]
        sentences = [s.strip() for s in row["source"] if s.strip()]
        assert item.refs == [" ".join(t.split()) for t in row["target"]]
        assert item.src_sentences == sentences
        used_rows = item.src_mask.any(dim=1)
        assert int(used_rows.sum()) == min(6, len(sentences))
        assert item.src[used_rows][:, 0].ne(0).all()


def test_xsum_documents(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "xsum-321" / "bbc321.jsonl"
    config = ReaderConfig(source_field="document", target_field="summary")
    meta = prepare_corpus([_source("jsonl", path, "test", config)], tmp_path / "x", limit=20)
    assert meta["splits"]["test"]["examples"] == 20
    dataset = SummarizationDataset(tmp_path / "x", "test")
    rows = _jsonl_rows(path, 20)
    for i, row in enumerate(rows):
        item = dataset[i]
        assert item.id == row["id"] and item.refs == [" ".join(str(row["summary"]).split())]
        paragraphs = [p for p in str(row["document"]).splitlines() if p.strip()]
        assert len(item.src_sentences) >= len(paragraphs)


def test_gigaword_parallel_is_kept_verbatim(shared_data: Path, tmp_path: Path) -> None:
    base = shared_data / "gigaword-1k" / "train"
    out = tmp_path / "g"
    args = ["prepare", "--format", "parallel", "--input", f"train={base}", "--output", str(out)]
    assert cli.main([*args, "--chunks", "1", "--chunk-len", "60", "--limit", "200", "--quiet"]) == 0
    assert read_meta(out)["options"]["tokenizer"] == "whitespace"
    dataset = SummarizationDataset(out, "train")
    articles = (shared_data / "gigaword-1k" / "train.article.txt").read_text().splitlines()
    titles = (shared_data / "gigaword-1k" / "train.title.txt").read_text().splitlines()
    for i in range(0, 200, 9):
        item = dataset[i]
        words = [*articles[i].split(), "</s>"][:60]
        decoded = dataset.vocab.decode(item.src[0].tolist(), strip_specials=False, stop_at_eos=False)
        assert decoded[: len(words)] == words
        assert dataset.vocab.decode(item.tgt.tolist()) == titles[i].split()
