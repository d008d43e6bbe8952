"""The preparation pipeline: storage format, metadata, vocabulary, bad input, streaming."""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scg_summarize.data.dataset import SummarizationDataset
from scg_summarize.data.errors import BadInputReport, DataError
from scg_summarize.data.options import PrepOptions, options_hash
from scg_summarize.data.prepare import InputSource, assign_split, prepare_corpus
from scg_summarize.data.preprocess import Preprocessor
from scg_summarize.data.progress import Progress, progress_enabled
from scg_summarize.data.rawtext import RawExample
from scg_summarize.data.readers import read_input
from scg_summarize.data.storage import SPLIT_FILES, ExampleText, TextStore, load_split, read_meta
from scg_summarize.data.vocab import Vocab

from ..conftest import TOY_STORIES, StoryWriter

SMALL = PrepOptions(num_chunks=3, chunk_len=5)


def _stories(path: Path, split: str | None = "train") -> InputSource:
    return InputSource(str(path), split, lambda report: read_input("cnndm", path, report=report))


def _raw(i: int, text: str, ref: str = "a summary") -> RawExample:
    return RawExample(id=f"r{i}", source=[text], references=[ref], origin=f"mem:{i}")


def _memory(split: str, examples: list[RawExample]) -> InputSource:
    return InputSource(f"mem-{split}", split, lambda report: iter(examples))


def test_prepared_layout_and_metadata(toy_story_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "prep"
    logged: list[str] = []
    meta = prepare_corpus([_stories(toy_story_dir)], out, SMALL, log=logged.append)
    assert read_meta(out) == json.loads((out / "meta.json").read_text())
    assert meta["options"] == SMALL.to_dict()
    assert meta["options_hash"] == options_hash(SMALL)
    assert meta["splits"]["train"]["examples"] == len(TOY_STORIES)
    assert meta["inputs"][0]["records_read"] == len(TOY_STORIES)
    assert meta["bad_input"]["total_skipped"] == 0
    assert meta["vocab_size"] == len(Vocab.load(out / "vocab.txt"))
    assert any(line.startswith("train: 4 examples") for line in logged)
    split = load_split(out, "train")
    assert split.src.shape == (4, 3, 5) and split.src.dtype == np.int32
    assert split.tgt_offsets[-1] == len(split.tgt)
    assert (split.salient == -1).all()
    assert not list(out.rglob("*.tmp*"))  # temporary word files are gone


def test_grid_view_matches_the_tokenized_document(toy_story_dir: Path, tmp_path: Path) -> None:
    prepare_corpus([_stories(toy_story_dir)], tmp_path / "p", SMALL)
    dataset = SummarizationDataset(tmp_path / "p", "train")
    pre = Preprocessor(SMALL)
    for i, raw in enumerate(read_input("cnndm", toy_story_dir)):
        processed = pre(raw)
        flat_words = [w for s in processed.sentence_tokens for w in [*s, "</s>"]][:15]
        item = dataset[i]
        assert item.src.reshape(-1)[: len(flat_words)].tolist() == dataset.vocab.encode(flat_words)
        assert int(item.src_mask.sum()) == len(flat_words)
        assert dataset.vocab.decode(item.tgt.tolist()) == processed.target_tokens
        assert item.refs == raw.references
        assert item.src_sentences == processed.sentences
    assert dataset.text(0).src_sentences[0] == "Mr. Dobbs visited the Quillon museum on Tuesday."


def test_the_stored_text_is_a_typed_record_and_a_bad_line_is_named(toy_story_dir: Path, tmp_path: Path) -> None:
    prepare_corpus([_stories(toy_story_dir)], tmp_path / "p", SMALL)
    dataset = SummarizationDataset(tmp_path / "p", "train")
    first = dataset.text(0)
    assert isinstance(first, ExampleText)
    assert first.origin and first.refs and first.src_sentences
    path = tmp_path / "p" / "train" / "text.jsonl"
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0]) == first.to_json()
    lines = [json.dumps({"id": "a", "refs": "one string", "src_sentences": []}) + "\n", json.dumps([1]) + "\n"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines), encoding="utf-8")
    store = TextStore(bad, np.cumsum([0] + [len(line.encode()) for line in lines]).astype(np.int64))
    with pytest.raises(ValueError, match=rf"{bad.name}:1: expected an object .*; refs not a list of strings"):
        store[0]
    with pytest.raises(ValueError, match=rf"{bad.name}:2: expected a JSON object, found list"):
        store[1]
    store.close()


def test_preparation_is_deterministic(toy_story_dir: Path, tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        prepare_corpus([_stories(toy_story_dir)], tmp_path / name, SMALL)
        files = sorted((tmp_path / name).rglob("*"))
        digests.append(
            {f.relative_to(tmp_path / name): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}
        )
    assert digests[0] == digests[1]


def test_options_hash_tracks_every_field() -> None:
    base = PrepOptions()
    assert options_hash(base) == options_hash(PrepOptions())
    assert options_hash(base) != options_hash(base.with_changes(chunk_len=80, num_chunks=5))
    assert options_hash(base) != options_hash(base.with_changes(lowercase=False))
    assert PrepOptions.from_dict(base.to_dict()) == base
    with pytest.raises(ValueError, match="unknown preprocessing option"):
        PrepOptions.from_dict({"colour": 1})
    with pytest.raises(ValueError, match="layout"):
        PrepOptions(layout="pages")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_chunks"):
        PrepOptions(num_chunks=0)


def test_vocabulary_comes_from_train_only(tmp_path: Path) -> None:
    train = [_raw(0, "alpha beta beta."), _raw(1, "beta gamma.")]
    test = [_raw(2, "alpha zeta zeta zeta.", ref="zeta")]
    meta = prepare_corpus([_memory("train", train), _memory("test", test)], tmp_path / "v", SMALL)
    vocab = Vocab.load(tmp_path / "v" / "vocab.txt")
    assert "zeta" not in vocab and "beta" in vocab
    assert vocab.tokens[4] == "beta"  # most frequent first
    assert meta["vocab_from"] == "train"
    assert meta["splits"]["test"]["src_unk_rate"] == pytest.approx(3 / 6)  # 3 zetas of 6 ids
    item = SummarizationDataset(tmp_path / "v", "test")[0]
    assert item.tgt.tolist() == [vocab.bos_id, vocab.unk_id, vocab.eos_id]
    # A given vocabulary is used as is.
    fixed = Vocab(["zeta"])
    meta = prepare_corpus([_memory("test", test)], tmp_path / "w", SMALL, vocab=fixed)
    assert Vocab.load(tmp_path / "w" / "vocab.txt") == fixed and meta["vocab_from"] == "given"


def test_vocab_size_and_target_truncation(tmp_path: Path) -> None:
    options = SMALL.with_changes(vocab_size=2, max_target_len=3)
    examples = [_raw(0, "a a a b b c.", ref="a b c d e f")]
    prepare_corpus([_memory("train", examples)], tmp_path / "t", options)
    dataset = SummarizationDataset(tmp_path / "t", "train")
    assert dataset.vocab.tokens[4:] == ["a", "b"]
    assert dataset.vocab.decode(dataset[0].tgt.tolist()) == ["a", "b", "<unk>"]
    assert len(dataset[0].tgt) == 5


def test_bad_input_fails_or_is_counted(toy_story_dir: Path, write_story: StoryWriter, tmp_path: Path) -> None:
    write_story("bad1", ["Article without highlights."], [], directory=toy_story_dir)
    (toy_story_dir / "bad2.story").write_text("@highlight\n\nonly\n", encoding="utf-8")
    (toy_story_dir / "bad3.story").write_text("...\n\n@highlight\n\nH\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad1\.story"):
        prepare_corpus([_stories(toy_story_dir)], tmp_path / "x", SMALL)
    assert not (tmp_path / "x" / "meta.json").exists()
    assert not list((tmp_path / "x").rglob("*.tmp*"))
    logged: list[str] = []
    meta = prepare_corpus([_stories(toy_story_dir)], tmp_path / "y", SMALL, skip_bad=True, log=logged.append)
    assert meta["splits"]["train"]["examples"] == len(TOY_STORIES) + 1  # "..." is a word
    assert meta["bad_input"]["skipped"] == {"missing_highlight": 1, "empty_source": 1}
    assert meta["inputs"][0]["bad_input"]["total_skipped"] == 2
    assert any("skipped 2 bad record(s)" in line for line in logged)


def test_records_read_counts_the_records_the_reader_skipped(tmp_path: Path) -> None:
    """An input's ``records_read`` counted only the records its reader handed on: a line of invalid
    JSON (or a Gigaword pair a filter drops) skipped inside the reader was not read, while a
    duplicate id skipped after it was (4 records: 3 read, 2 kept, 2 skipped)."""
    path = tmp_path / "t.jsonl"
    lines = [
        json.dumps({"id": "a", "source": "The cat sat.", "target": "cat"}),
        "{bad json",
        json.dumps({"id": "b", "source": "A dog ran.", "target": "dog"}),
        json.dumps({"id": "b", "source": "A dog ran again.", "target": "dog"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = InputSource(str(path), "train", lambda report: read_input("jsonl", path, report=report))
    meta = prepare_corpus([source], tmp_path / "p", SMALL, skip_bad=True)
    (record,) = meta["inputs"]
    assert record["bad_input"]["skipped"] == {"bad_json": 1, "duplicate_id": 1}
    assert (record["records_read"], record["examples_kept"]) == (4, 2)
    assert record["records_read"] == record["examples_kept"] + record["bad_input"]["total_skipped"]


def test_empty_sources_after_preprocessing_are_reported(tmp_path: Path) -> None:
    examples = [_raw(0, "fine words."), _raw(1, "\u200b \u200b"), _raw(2, "ok.", ref=" ")]
    with pytest.raises(DataError, match=r"mem:1: source has no words \[empty_source\]"):
        prepare_corpus([_memory("train", examples)], tmp_path / "e", SMALL)
    meta = prepare_corpus([_memory("train", examples)], tmp_path / "f", SMALL, skip_bad=True)
    assert meta["bad_input"]["skipped"] == {"empty_source": 1, "empty_target": 1}
    assert meta["splits"]["train"]["examples"] == 1


def test_existing_output_needs_overwrite(toy_story_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    prepare_corpus([_stories(toy_story_dir)], out, SMALL)
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="overwrite"):
        prepare_corpus([_stories(toy_story_dir)], out, SMALL)
    meta = prepare_corpus([_stories(toy_story_dir)], out, SMALL, overwrite=True, limit=2)
    assert meta["splits"]["train"]["examples"] == 2
    assert (out / "notes.txt").read_text() == "keep me"  # only our own files are replaced


def test_a_users_files_in_a_folder_without_a_corpus_need_overwrite(toy_story_dir: Path, tmp_path: Path) -> None:
    """Only vocab.txt was protected: a split's files of a folder that holds no meta.json were
    replaced without --overwrite."""
    out = tmp_path / "u"
    (out / "train").mkdir(parents=True)
    mine = out / "train" / SPLIT_FILES[0]
    mine.write_text("mine\n")
    with pytest.raises(FileExistsError, match=rf"{mine} exists \(and {out} holds no prepared corpus\)"):
        prepare_corpus([_stories(toy_story_dir)], out, SMALL)
    assert mine.read_text() == "mine\n"
    (out / "other").mkdir()  # a file prepare would not write is no obstacle
    (out / "other" / SPLIT_FILES[0]).write_text("mine too\n")
    mine.unlink()
    prepare_corpus([_stories(toy_story_dir)], out, SMALL)
    assert (out / "other" / SPLIT_FILES[0]).read_text() == "mine too\n"


def test_a_fraction_that_gets_no_example_is_noted(tmp_path: Path) -> None:
    """--valid-fraction 0.001 on a small corpus gave no valid split without a word."""
    examples = [_raw(i, f"word{i % 7} text.") for i in range(30)]
    logged: list[str] = []
    source = InputSource("mem", None, lambda report: iter(examples))
    meta = prepare_corpus([source], tmp_path / "n", SMALL, split_fractions={"valid": 0.001}, log=logged.append)
    assert set(meta["splits"]) == {"train"}
    assert any("no example fell in split 'valid' (a fraction 0.001 of 30 examples" in line for line in logged)


def test_hash_split_assignment(tmp_path: Path) -> None:
    fractions = {"valid": 0.2, "test": 0.1}
    names = [assign_split(f"doc{i}", fractions) for i in range(5000)]
    assert names == [assign_split(f"doc{i}", fractions) for i in range(5000)]
    assert abs(names.count("test") / 5000 - 0.1) < 0.02
    assert abs(names.count("valid") / 5000 - 0.2) < 0.02
    examples = [_raw(i, f"word{i % 7} text.") for i in range(60)]
    source = InputSource("mem", None, lambda report: iter(examples))
    meta = prepare_corpus([source], tmp_path / "h", SMALL, split_fractions=fractions)
    counts = {k: v["examples"] for k, v in meta["splits"].items()}
    assert sum(counts.values()) == 60 and set(counts) == {"train", "valid", "test"}
    with pytest.raises(ValueError, match="fractions"):
        prepare_corpus([source], tmp_path / "bad", SMALL, split_fractions={"test": 1.0})


def test_preparation_streams_in_bounded_memory(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(50)]
    n_docs, doc_words = 20, 400  # ~27 KB of text: tracemalloc makes preparing it ~6x dearer, so it stays small

    def documents(report: BadInputReport) -> Iterator[RawExample]:
        for d in range(n_docs):
            body = " ".join(words[(d * 7 + k) % 50] for k in range(doc_words))
            yield RawExample(id=f"d{d}", source=[body], references=["w1 w2"], origin=f"gen:{d}")

    tracemalloc.start()
    try:
        meta = prepare_corpus([InputSource("gen", "train", documents)], tmp_path / "m", SMALL, log=None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert meta["splits"]["train"]["examples"] == n_docs
    # Streaming peaks at ~0.10 MiB; a twin that holds the 20 preprocessed documents (Preprocessor's output,
    # kept in a list by a wrapped Preprocessor.__call__) peaks at ~0.55 MiB: the bound sits ~2.5x from both.
    assert peak < 2**18, f"peak traced memory {peak / 2**20:.2f} MiB"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_display() -> None:
    stream = io.StringIO()
    with Progress("pass", total=3, use_tqdm=False, stream=stream, interval=0.0) as bar:
        for _ in range(3):
            bar.update()
    assert bar.count == 3
    assert stream.getvalue().endswith("\rpass: 3/3\n")
    quiet = io.StringIO()
    with Progress("pass", enabled=False, stream=quiet) as bar:
        bar.update(5)
    assert bar.count == 5 and quiet.getvalue() == ""
    assert progress_enabled(False, _Tty())
    assert not progress_enabled(True, _Tty())  # --quiet
    assert not progress_enabled(False, io.StringIO())  # not a terminal
