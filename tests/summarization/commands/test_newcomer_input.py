"""Issue 18, input and output side: (4) a wrapped article given as text is noticed and can be
read as one document; (10) ``summarize`` and ``baseline`` show progress on a terminal; (11)
options to block number tokens and immediate word repeats."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import pytest
import torch
from scg_summarize import cli
from scg_summarize.commands._decoding_args import add_decode_arguments, decode_options
from scg_summarize.data import Vocab
from scg_summarize.data import progress as progress_module
from scg_summarize.decoding import (
    DecodeOptions,
    SpecialIds,
    Summarizer,
    apply_constraints,
    beam_search,
    greedy_search,
)
from scg_summarize.decoding.blocking import constrain_candidates, is_number_token, number_token_ids
from scg_summarize.decoding.wrapped import looks_wrapped, read_paragraphs

from ..eval_support import UNCONSTRAINED, ToySetup, dummy_batch, make_toy_setup
from ..toy_decoders import PrefixTableDecoder

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ToySetup:
    return make_toy_setup(tmp_path_factory.mktemp("input"), n_test=5)


WRAPPED = """The committee met on a cold morning to discuss the plans for the
new bridge across the river, which had been delayed for nearly three
years by arguments about its cost and its design.

Several members said that the town could not wait any longer, and
that the old crossing was no longer safe for heavy lorries.
"""
ONE_PER_LINE = """The committee met to discuss the plans for the new bridge across the river.
A small robot learned to sort red and blue blocks, its makers said on Friday.
Residents returned home after the flood, and nobody was hurt.
"""
HEADLINES = """Bridge plans delayed again
Robot learns to sort blocks
Flood waters recede in Pemberwick
"""


# ----------------------------------------------------------------------------- (4) wrapped text
def test_wrapped_prose_is_recognised_and_other_text_is_not() -> None:
    verdict = looks_wrapped(WRAPPED.splitlines())
    assert verdict.wrapped and verdict.breaks == 3 and verdict.inside == 3 and verdict.first_line == 1
    assert not looks_wrapped(ONE_PER_LINE.splitlines()).wrapped  # every line ends a sentence
    assert not looks_wrapped(HEADLINES.splitlines()).wrapped  # the next line starts with a capital
    assert not looks_wrapped(["one line only"]).wrapped


def test_summarize_warns_on_a_wrapped_file_and_reads_it_whole_on_request(toy: ToySetup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    article = tmp_path / "article.txt"
    article.write_text(WRAPPED, encoding="utf-8")
    common = ["summarize", "--run", str(toy.run), "--input", str(article), "--beam", "2", "--max-len", "5", "--quiet"]
    assert cli.main(common) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 6  # still one summary per line (blank line: empty), as documented...
    assert f"warning: {article}:1: 3 of 3 line breaks fall inside a sentence" in captured.err  # ...but said
    assert "--format document" in captured.err
    assert cli.main([*common, "--format", "document"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1 and "warning" not in captured.err
    assert read_paragraphs(str(article)) == [" ".join(p.split("\n")).strip() for p in WRAPPED.strip().split("\n\n")]
    plain = tmp_path / "docs.txt"
    plain.write_text(ONE_PER_LINE, encoding="utf-8")
    assert cli.main(["summarize", "--run", str(toy.run), "--input", str(plain), "--max-len", "5", "--quiet"]) == 0
    assert "warning" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- (10) progress
def test_summarize_and_baseline_show_progress_on_a_terminal(  # type: ignore[no-untyped-def]
    toy: ToySetup, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(progress_module, "progress_enabled", lambda quiet=False: not quiet)  # (commands import it late)
    out = tmp_path / "s.txt"
    assert (
        cli.main(["summarize", "--run", str(toy.run), "--data", str(toy.data), "--max-len", "4", "--output", str(out)])
        == 0
    )
    err = capsys.readouterr().err
    assert "summarize" in err and "5/5" in err  # a bar with the total
    assert cli.main(["baseline", "--method", "lead3", "--data", str(toy.data)]) == 0
    err = capsys.readouterr().err
    assert "LEAD-3 test" in err and "5/5" in err
    assert cli.main(["baseline", "--method", "lead3", "--data", str(toy.data), "--quiet"]) == 0
    assert "5/5" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- (11) blocking
def test_number_tokens() -> None:
    assert all(is_number_token(t) for t in ("#", "##", "##.#", "#,###", "1990", "$##", "##%", "#-#"))
    assert not any(is_number_token(t) for t in ("the", "<unk>", ".", "a#b", "#hashtag", "-", "$"))
    assert number_token_ids(["<pad>", "the", "##", "cat", "#.#"]) == (2, 4)


def _peaky(seed: int) -> PrefixTableDecoder:
    return PrefixTableDecoder(8, seed=seed, temperature=0.3)  # repeats itself when unconstrained


def _has_immediate_repeat(tokens: list[int]) -> bool:
    return any(a == b for a, b in itertools.pairwise(tokens))


@pytest.mark.parametrize("greedy", [True, False])
def test_blocking_immediate_repeats(greedy: bool) -> None:
    search = greedy_search if greedy else beam_search
    free = DecodeOptions(beam_size=3, greedy=greedy, max_len=12, **UNCONSTRAINED)
    blocked = DecodeOptions(beam_size=3, greedy=greedy, max_len=12, no_repeat_word=True, **UNCONSTRAINED)
    # 20 examples of one search (the decoder's distributions are a seeded function of the example and prefix)
    repeats = sum(_has_immediate_repeat(hyps[0].tokens) for hyps in search(_peaky(0), dummy_batch(20), free))
    for hyps in search(_peaky(0), dummy_batch(20), blocked):
        for hyp in hyps:
            assert not _has_immediate_repeat(hyp.tokens)
    assert repeats > 0  # the option is what removes them


@pytest.mark.parametrize("greedy", [True, False])
def test_blocked_words_are_never_generated(greedy: bool) -> None:
    search = greedy_search if greedy else beam_search
    options = DecodeOptions(beam_size=3, greedy=greedy, max_len=10, **UNCONSTRAINED)
    seen = {word for hyps in search(_peaky(0), dummy_batch(10), options) for word in hyps[0].tokens}  # 10 examples
    banned = tuple(sorted(seen))[:2]  # words the free search does use
    special = SpecialIds(blocked=banned)
    for hyps in search(_peaky(0), dummy_batch(10), options, special):
        for hyp in hyps:
            assert not set(hyp.tokens) & set(banned)


def test_candidate_constraints_agree_with_the_full_step() -> None:
    # the top-k path of beam search bans exactly what apply_constraints bans
    gen = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(3, 12, generator=gen), dim=1)
    history = torch.tensor([[5, 6, 7], [7, 7, 8], [9, 4, 9]])
    options = DecodeOptions(beam_size=2, max_len=20, min_len=0, no_repeat_word=True, no_repeat_ngram=2)
    special = SpecialIds(blocked=(4, 10))
    full = apply_constraints(log_probs, history, options, special)
    words = torch.arange(12).repeat(3, 1)
    partial = constrain_candidates(log_probs, words, history, options, special)
    assert torch.equal(torch.isneginf(full), torch.isneginf(partial))
    assert torch.isneginf(full[:, [4, 10]]).all()  # blocked
    assert bool(torch.isneginf(full[0, 7])) and bool(torch.isneginf(full[1, 8])) and bool(torch.isneginf(full[2, 9]))


def test_the_command_line_options_reach_the_search(toy: ToySetup, capsys) -> None:  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser()
    add_decode_arguments(parser)
    options = decode_options(parser.parse_args(["--block-repeats", "--block-digits"]))
    assert options.no_repeat_word and options.block_digits
    vocab = Vocab(["the", "##", "cat", "#.#"])
    summarizer = Summarizer(_peaky(0), vocab, options)
    assert summarizer.special.blocked == (vocab.token_to_id("##"), vocab.token_to_id("#.#"))
    common = ["summarize", "--run", str(toy.run), "--data", str(toy.data), "--max-len", "8", "--quiet", "--jsonl"]
    assert cli.main([*common, "--block-repeats", "--beam", "2"]) == 0
    for line in capsys.readouterr().out.splitlines():
        assert not _has_immediate_repeat(json.loads(line)["tokens"])
