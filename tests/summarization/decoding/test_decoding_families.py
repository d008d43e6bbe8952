"""Every model family decodes through the one path: a trainer run directory, `load_run`, the one
step adapter (`ModelStepDecoder`), beam and greedy search, teacher forcing."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from scg_summarize.data import SummarizationDataset, make_synthetic_corpus
from scg_summarize.data.batching import collate_examples
from scg_summarize.decoding import (
    DecodeOptions,
    ModelStepDecoder,
    RunLoadError,
    beam_search,
    documents_from_split,
    greedy_search,
    load_run,
)
from scg_summarize.decoding.protocol import request_extras
from scg_summarize.evaluation import teacher_forced

from ..eval_support import UNCONSTRAINED, write_run

pytestmark = pytest.mark.usefixtures("single_thread")

#: one configuration per family (the C2F family's three attentions, Paulus, ABS, MAL) and its family name
FAMILIES: dict[str, str] = {
    "tiny-STANDARD": "c2f",
    "tiny-HIER": "c2f",
    "tiny-C2F": "c2f",
    "tiny-PAULUS-ML": "paulus",
    "tiny-ABS": "abs",
    "tiny-MAL": "mal",
}
#: small sizes for the families whose tiny overlay leaves them at the paper's
SMALL = ["model.emb_dim=8", "model.hidden=8"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents of 4 chunks of 8 words (not 8 of 16): each test encodes its 4 documents five times, and
    MAL's encoders scan every word in Python (a quarter of the words: 0.25 -> 0.11 s of CPU for MAL)."""
    out = tmp_path_factory.mktemp("families") / "data"
    make_synthetic_corpus(out, n_train=12, n_valid=2, n_test=4, seed=4, num_chunks=4, chunk_len=8)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {name: write_run(root / name, corpus, name, SMALL, seed=3) for name in FAMILIES}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_loads_and_decodes_through_the_one_adapter(name: str, runs: dict[str, Path], corpus: Path) -> None:
    loaded = load_run(runs[name])
    assert isinstance(loaded.decoder, ModelStepDecoder)
    assert loaded.family == FAMILIES[name] and loaded.model == name and loaded.data_dir == corpus
    batch = collate_examples(list(documents_from_split(SummarizationDataset(corpus, "test"))))
    options = DecodeOptions(max_len=6, **UNCONSTRAINED)  # type: ignore[arg-type]
    greedy = greedy_search(loaded.decoder, batch, DecodeOptions(greedy=True, max_len=6, **UNCONSTRAINED))  # type: ignore[arg-type]
    beam1 = beam_search(loaded.decoder, batch, DecodeOptions(beam_size=1, max_len=6, **UNCONSTRAINED))  # type: ignore[arg-type]
    for (g,), (b,) in zip(greedy, beam1):  # beam search with one hypothesis is greedy search
        assert b.tokens == g.tokens
        assert b.log_prob == pytest.approx(g.log_prob, abs=1e-4)
    wide = beam_search(loaded.decoder, batch, options)
    vocab = len(loaded.vocab)
    for hyps in wide:
        assert all(0 <= w < vocab for w in hyps[0].tokens) and hyps[0].log_prob <= 0.0
    # teacher forcing through the adapter scores what the model's own forward pass scores
    scored = teacher_forced(loaded.decoder, batch)
    with torch.no_grad():
        out = loaded.decoder.model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="greedy")
    assert sum(scored.nll) == pytest.approx(float(out.total_nll()), rel=1e-4)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_offers_exactly_the_extras_its_steps_return(
    name: str, runs: dict[str, Path], corpus: Path
) -> None:
    """``offered_extras`` is what a step returns when asked for all (so that a request for a name it
    lacks is refused, and evaluation's optional attention is asked for where it exists)."""
    decoder = load_run(runs[name]).decoder
    assert isinstance(decoder, ModelStepDecoder)
    batch = collate_examples(list(documents_from_split(SummarizationDataset(corpus, "test"), range(2))))
    request_extras(decoder, ("*",))
    state = decoder.init_state(batch)
    _, _, extras = decoder.step(state, torch.full((2,), 2))
    assert sorted(extras) == sorted(decoder.offered_extras)
    assert ("chunk_read" in decoder.offered_extras) == (name == "tiny-C2F")  # the one family reading chosen chunks


def test_a_run_loads_its_best_checkpoint_else_the_latest(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for path in runs["tiny-ABS"].iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    (run / "best.pt").rename(run / "checkpoint.pt")
    assert load_run(run).checkpoint == run / "checkpoint.pt"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda run: (run / "config.json").unlink(), r"config\.json: no such file"),
        (lambda run: (run / "config.json").write_text("{"), r"config\.json: not valid JSON"),
        (lambda run: (run / "best.pt").unlink(), r"no checkpoint \(best\.pt or checkpoint\.pt\)"),
        (lambda run: (run / "best.pt").write_bytes(b"\x80\x02garbage"), r"best\.pt: not a readable checkpoint"),
        (lambda run: (run / "best.pt").write_bytes(b""), r"best\.pt: empty file"),
        (lambda run: torch.save({"weights": 1}, run / "best.pt"), r"best\.pt: not an scg-summarize checkpoint"),
    ],
)
def test_a_broken_run_is_refused_naming_the_file(runs: dict[str, Path], tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    for path in runs["tiny-STANDARD"].iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    damage(run)
    with pytest.raises(RunLoadError, match=message):
        load_run(run)
    with pytest.raises(RunLoadError, match="no such run directory"):
        load_run(tmp_path / "nowhere")


def _edited(runs: dict[str, Path], tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of the tiny-STANDARD run whose ``config.json`` is ``edit(config)``."""
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    for path in runs["tiny-STANDARD"].iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    config = json.loads((run / "config.json").read_text())
    edit(config)
    (run / "config.json").write_text(json.dumps(config))
    return run


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (  # a table whose name is misspelt: the run decoded with the library's defaults, not these
            lambda c: c.update(evl={"beam_size": 2}),
            "config.json: evl: not an entry of a run configuration; did you mean 'eval'? "
            "(known: name, description, model, train, data, eval)",
        ),
        (
            lambda c: c["train"].update(bach_size=3),
            "config.json: train.bach_size: unknown option; did you mean 'batch_size'? (known, as ",
        ),
        (lambda c: c["data"].update(data_dir="x"), "config.json: data.data_dir: unknown option (known, as "),
        (
            lambda c: c["model"].update(hiden=3),
            "config.json: model.hiden: not an option of the 'c2f' family; did you mean 'hidden'? "
            "(model.family = 'c2f'; its options: ",
        ),
        (lambda c: c.update(eval=3), "config.json: eval: expected a table of options, got 3"),
    ],
)
def test_an_unknown_key_in_config_json_is_refused_naming_the_file_and_the_key(  # type: ignore[no-untyped-def]
    runs: dict[str, Path], tmp_path: Path, edit, message: str
) -> None:
    """Each was ignored without a word (load_run read config.json's ``eval`` table and nothing else
    it did not know of)."""
    run = _edited(runs, tmp_path, edit)
    with pytest.raises(RunLoadError) as info:
        load_run(run)
    assert f"{run / message}" in str(info.value)


def test_every_problem_of_config_json_is_named_at_once_and_a_known_key_passes(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    def edit(config):  # type: ignore[no-untyped-def]
        config.update(evl={}, extra=1)
        config["train"]["lr_sched"] = "x"

    with pytest.raises(RunLoadError) as info:
        load_run(_edited(runs, tmp_path, edit))
    lines = str(info.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["evl", "extra", "train.lr_sched"]
    edited = _edited(runs, tmp_path, lambda c: c["eval"].update(beam_size=2))
    options = load_run(edited).run_options
    assert options is not None and options.beam_size == 2


def test_config_keys_are_the_fields_of_a_run_configuration() -> None:
    from scg_summarize.decoding.loading import CONFIG_KEYS
    from scg_summarize.train.config import Config  # (decoding may not import train: test_layers)

    assert set(CONFIG_KEYS) == {f.name for f in fields(Config)}
