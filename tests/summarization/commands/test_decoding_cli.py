"""``scg-summarize summarize`` on a toy run directory: inputs, outputs, attention, errors."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import torch
from scg_summarize import cli
from scg_summarize.data import SummarizationDataset
from scg_summarize.decoding import DecodeOptions, Summarizer, documents_from_split, load_run, read_documents
from scg_summarize.decoding.inputs import encode_text
from scg_summarize.decoding.summarizer import replace_unks, split_token_sentences

from ..eval_support import ToySetup, make_toy_setup

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("cli"), n_test=6)


def _raw_docs(toy: ToySetup, n: int) -> list[str]:
    """Test documents of the synthetic corpus as raw text lines (sentences separated by a literal
    backslash-n, the text format's paragraph separator)."""
    dataset = SummarizationDataset(toy.data, "test")
    return [" \\n ".join(dataset.text(i).src_sentences) for i in range(n)]


def test_summarize_text_file_one_line_per_document(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(_raw_docs(toy, 3)) + "\n\n", encoding="utf-8")
    status = cli.main(["summarize", "--run", str(toy.run), "--input", str(source), "--beam", "2", "--max-len", "6"])
    assert status == 0
    lines = capsys.readouterr().out.splitlines()  # the blank 4th input line gets an empty 4th output line
    assert len(lines) == 4 and all(1 <= len(line.split()) <= 6 for line in lines[:3]) and lines[3] == ""


def test_raw_text_is_encoded_like_the_prepared_split(toy: ToySetup) -> None:
    run = load_run(toy.run)
    dataset = SummarizationDataset(toy.data, "test")
    for i in range(3):
        doc = encode_text("x", dataset.text(i).src_sentences, run.prep_options, run.vocab, sentences_given=True)
        assert torch.equal(doc.src, dataset[i].src)
        assert torch.equal(doc.src_mask, dataset[i].src_mask)


def test_summarize_stdin_and_prepared_split_agree(toy: ToySetup, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    # the synthetic corpus gives sentences, so the prepared split is the reference here
    common = ["--run", str(toy.run), "--beam", "3", "--max-len", "5"]
    assert cli.main(["summarize", *common, "--data", str(toy.data), "--limit", "2"]) == 0
    from_split = capsys.readouterr().out.splitlines()
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(_raw_docs(toy, 2)) + "\n"))
    assert cli.main(["summarize", *common, "--input", "-"]) == 0
    # whitespace tokenizer + sentence layout: a raw line re-splits into the same chunks
    assert capsys.readouterr().out.splitlines() == from_split


def test_jsonl_with_attention(toy: ToySetup, tmp_path: Path) -> None:
    out = tmp_path / "att.jsonl"
    args = ["summarize", "--run", str(toy.run), "--data", str(toy.data), "--limit", "2", "--max-len", "5"]
    assert cli.main([*args, "--attention", "--n-best", "2", "--output", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2
    for record in records:
        att = record["attention"]
        steps = len(record["tokens"]) + 1
        assert att["steps"][-1] == "</s>" and len(att["steps"]) == steps
        assert len(att["coarse"]) == steps and len(att["coarse"][0]) == len(att["source"])
        assert len(att["word"]) == steps and len(att["word"][0][0]) == 16  # N (the synthetic chunk length)
        assert sum(att["coarse"][0]) == pytest.approx(1.0, abs=1e-3)
        assert [s["score"] for s in record["n_best"]] == sorted((s["score"] for s in record["n_best"]), reverse=True)
        assert record["refs"]


def test_extras_on_the_command_line(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--jsonl --extras NAMES`` writes the named attention only; a name the model does not return
    and ``--extras`` without JSON output are usage errors; ``evaluate`` has no ``--extras``."""
    args = ["summarize", "--run", str(toy.run), "--data", str(toy.data), "--limit", "2", "--max-len", "5"]
    out = tmp_path / "coarse.jsonl"
    assert cli.main([*args, "--jsonl", "--extras", "coarse_attn", "--output", str(out)]) == 0
    for line in out.read_text(encoding="utf-8").splitlines():
        att = json.loads(line)["attention"]
        assert set(att) == {"steps", "source", "coarse"}  # not the word attention <unk> replacement records
    capsys.readouterr()
    assert cli.main([*args, "--jsonl", "--extras", "coarse_attn,coarse"]) == 2
    err = capsys.readouterr().err
    assert "asks for 'coarse'" in err and "coarse_attn, chunk_read, word_attn" in err and "Traceback" not in err
    assert cli.main([*args, "--extras", "coarse_attn"]) == 2
    err = capsys.readouterr().err
    assert "--extras records model outputs" in err and "add --jsonl" in err
    status = cli.main(["evaluate", "--run", str(toy.run), "--data", str(toy.data), "--extras", "coarse_attn"])
    assert status == 2 and "unrecognized arguments: --extras" in capsys.readouterr().err


def test_unk_replacement_copies_the_most_attended_source_word() -> None:
    attn = torch.zeros(3, 2, 2)
    attn[1, 1, 0] = 0.9  # step 1 attends to chunk 1, word 0
    attn[1, 0, 0] = 0.1
    tokens, count = replace_unks(["a", "<unk>", "c"], attn, [["x", "y"], ["zorb", "w"]])
    assert tokens == ["a", "zorb", "c"] and count == 1
    assert replace_unks(["<unk>"], None, [["x"]]) == (["<unk>"], 0)
    assert split_token_sentences(["a", ".", "b", "!", "c"]) == [["a", "."], ["b", "!"], ["c"]]


def test_summarizer_replaces_unks_from_the_toy_models_attention(toy: ToySetup) -> None:
    run = load_run(toy.run)
    dataset = SummarizationDataset(toy.data, "test")
    docs = list(documents_from_split(dataset, range(2)))
    opts = DecodeOptions(beam_size=2, max_len=4, unk="replace", min_len=0, no_repeat_ngram=0)
    summarizer = Summarizer(run.decoder, run.vocab, opts)
    for _, summaries in summarizer.summarize(docs):
        best = summaries[0]
        assert "word_attn" in best.extras
        assert len(best.tokens) == len(best.token_ids)
        assert best.unks_replaced == best.token_ids.count(run.vocab.unk_id)


@pytest.mark.parametrize(
    ("content", "fmt", "message"),
    [
        ('{"source": "a b"}\n{"document": "x"}\n', "jsonl", r"docs\.in:2: missing field 'source'"),
        ('{"source": "a b"}\nnot json\n', "jsonl", r"docs\.in:2: invalid JSON"),
        ('{"source": 3}\n', "jsonl", r"docs\.in:1: field 'source' must be a string"),
    ],
)
def test_bad_input_names_file_and_line(
    toy: ToySetup, tmp_path: Path, capsys, content: str, fmt: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "docs.in"
    source.write_text(content, encoding="utf-8")
    status = cli.main(["summarize", "--run", str(toy.run), "--input", str(source), "--format", fmt])
    assert status == 2
    assert re.search(message, capsys.readouterr().err)


def test_json_lines_given_without_format_are_refused_not_summarized_as_text(
    toy: ToySetup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (each line's braces, keys and quotes were summarized as words, with no word said)
    source = tmp_path / "docs.jsonl"
    lines = [json.dumps({"id": f"d{i}", "source": doc}) for i, doc in enumerate(_raw_docs(toy, 2))]
    source.write_text("\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert cli.main(["summarize", "--run", str(toy.run), "--input", str(source), "--greedy"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"--input {source}:2: a JSON object ('id', 'source'), which the default --format text would" in err
    assert "pass --format jsonl to read its 'source' field" in err
    for fmt in ("jsonl", "text"):  # said: read as asked
        assert cli.main(["summarize", "--run", str(toy.run), "--input", str(source), "--greedy", "--format", fmt]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 2 + (fmt == "text")  # (text: the blank line too)


@pytest.mark.parametrize("command", ["summarize", "evaluate"])
def test_a_directory_option_that_names_no_directory_is_named_as_typed(
    toy: ToySetup, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # (the message was load_run's: "load_run(data_dir='...'): no such directory", an argument the user never typed)
    missing, a_file = tmp_path / "nope", toy.data / "vocab.txt"
    assert cli.main([command, "--run", str(toy.run), "--data", str(missing), "--greedy"]) == 2
    err = capsys.readouterr().err
    assert f"scg-summarize {command}: error: --data {missing}: no such directory; expected a corpus" in err
    assert "load_run" not in err
    assert cli.main([command, "--run", str(toy.run), "--data", str(a_file), "--greedy"]) == 2
    assert f"--data {a_file}: a file, not a directory; expected a corpus" in capsys.readouterr().err
    assert cli.main([command, "--run", str(missing), "--data", str(toy.data), "--greedy"]) == 2
    assert f"--run {missing}: no such directory; expected a run directory" in capsys.readouterr().err


def test_missing_run_and_conflicting_inputs_are_clear_errors(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli.main(["summarize", "--run", str(tmp_path / "nope"), "--input", "-"]) == 2
    assert f"--run {tmp_path / 'nope'}: no such directory" in capsys.readouterr().err
    assert cli.main(["summarize", "--run", str(tmp_path), "--input", "-"]) == 2
    assert "config.json: no such file" in capsys.readouterr().err
    assert cli.main(["summarize", "--run", str(toy.run)]) == 2
    assert "give --input FILE (raw documents) or --data DIR" in capsys.readouterr().err
    assert (
        cli.main(["summarize", "--run", str(toy.run), "--data", str(toy.data), "--min-len", "9", "--max-len", "3"]) == 2
    )
    assert "min_len" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--input", "DOCS", "--split", "valid"], "--split selects a split of --data; with --input it reads nothing"),
        (["--data", "DATA", "--format", "jsonl"], "--format describes --input; a --data split is read as prepared"),
        (["--data", "DATA", "--source-field", "doc"], "--source-field describes --input"),
        (["--input", "DOCS", "--source-field", "doc"], "--source-field names a field of --format jsonl, not of text"),
        (["--input", "DOCS", "--data", "OTHER"], "vocabulary"),  # the run's own vocab.txt is read: --data must agree
        (["--input", "DOCS", "--coarse-topk", "9"], "coarse_topk = 9, but the model reads documents of 8 chunks"),
    ],
)
def test_an_input_option_that_would_be_ignored_is_refused(  # type: ignore[no-untyped-def]
    given: list[str], said: str, toy: ToySetup, tmp_path: Path, capsys
) -> None:
    """Each of these was accepted and did nothing (--data OTHER with --input: the run's own
    vocabulary was read, never compared; --coarse-topk beyond the chunks read them all)."""
    from scg_summarize.data import make_synthetic_corpus
    from scg_summarize.data.synthetic import SyntheticConfig

    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_raw_docs(toy, 1)) + "\n", encoding="utf-8")
    other = tmp_path / "other"
    if "OTHER" in given:
        make_synthetic_corpus(other, n_train=4, n_valid=0, n_test=1, seed=1, config=SyntheticConfig(content_words=150))
    names = {"DOCS": str(docs), "DATA": str(toy.data), "OTHER": str(other)}
    assert cli.main(["summarize", "--run", str(toy.run), *(names.get(a, a) for a in given)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_coarse_topk_on_a_model_that_chooses_no_chunks_is_refused(tmp_path: Path) -> None:
    """HIER reads every chunk: --coarse-topk 2 was ignored (returned the model as it was)."""
    from scg_summarize.data import make_synthetic_corpus

    from ..eval_support import write_run

    data = tmp_path / "data"
    make_synthetic_corpus(data, n_train=4, n_valid=0, n_test=1, seed=1)
    run = write_run(tmp_path / "hier", data, "tiny-HIER", ["model.hidden=8", "model.emb_dim=8"], seed=1)
    assert load_run(run, coarse_topk=1).decoder.coarse_topk == 1  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"coarse_topk = 2: this C2FSummarizer chooses no chunks"):
        load_run(run, coarse_topk=2)


def test_read_documents_skips_blank_lines_and_numbers_ids(toy: ToySetup, tmp_path: Path) -> None:
    run = load_run(toy.run)
    source = tmp_path / "d.txt"
    source.write_text("\n" + _raw_docs(toy, 1)[0] + "\n   \n", encoding="utf-8")
    docs = list(read_documents(str(source), run.prep_options, run.vocab))
    assert [d.id for d in docs] == [f"{source}:2"]


def test_python_api_arguments_of_the_wrong_kind_are_named(toy: ToySetup) -> None:
    """``load_run(device="cuda")`` without a GPU blamed the checkpoint ("not a readable
    checkpoint"); a dict of options and strings for documents failed with AttributeError."""
    from scg_summarize.decoding import RunLoadError

    with pytest.raises(RunLoadError, match=r"load_run\(device='gpu'\): expected 'cpu', 'cuda' or 'cuda:N'"):
        load_run(toy.run, device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(RunLoadError, match=r"load_run\(device=...\): 'cuda', but no CUDA GPU is available"):
            load_run(toy.run, device="cuda")
    with pytest.raises(RunLoadError, match=r"load_run\(run_dir\): expected a path, got NoneType"):
        load_run(None)  # type: ignore[arg-type]
    run = load_run(toy.run)
    with pytest.raises(TypeError, match=r"Summarizer\(options=...\): expected a DecodeOptions, got dict"):
        Summarizer(run.decoder, run.vocab, {"beam_size": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"expected SourceDocument objects .*got str"):
        list(Summarizer(run.decoder, run.vocab, DecodeOptions()).summarize(["alpha1 alpha2"]))  # type: ignore[list-item]


def test_a_document_longer_than_the_model_reads_is_noted(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The words beyond the model's M x N grid were left out without a word."""
    long = tmp_path / "long.txt"
    long.write_text(" ".join(f"w{i % 40}" + (" ." if i % 9 == 8 else "") for i in range(600)) + "\n")
    args = ["summarize", "--run", str(toy.run), "--max-len", "4", "--beam", "1"]
    assert cli.main([*args, "--input", str(long), "--format", "document"]) == 0
    err = capsys.readouterr().err
    assert "1 document(s) are longer than the 8 chunks of 16 words the model reads" in err, err
    short = tmp_path / "short.txt"
    short.write_text("a short document .\n")
    assert cli.main([*args, "--input", str(short)]) == 0
    assert "longer than" not in capsys.readouterr().err
