"""Extractive baselines: unit behaviour, and the known FIRST numbers on real data."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from scg_summarize import cli
from scg_summarize.data import InputSource, PrepOptions, ReaderConfig, prepare_corpus, read_input
from scg_summarize.evaluation import BASELINES, first_sentence, get_baseline, lead, prefix_bytes, textrank
from scg_summarize.evaluation.baselines import pagerank, sentence_graph

from ..eval_support import shared_data_dir

DOC = [
    "Zorbs are small blue birds.",
    "Zorbs eat seeds and small blue berries.",
    "The weather was mild.",
    "Many zorbs nest in blue berry bushes.",
]


def test_first_lead_prefix() -> None:
    assert first_sentence(DOC) == DOC[:1]
    assert lead(DOC, 3) == DOC[:3] and lead(DOC[:2], 3) == DOC[:2]
    assert prefix_bytes(DOC, 20) == ["Zorbs are small blue"]
    assert prefix_bytes(["é" * 50], 5) == ["éé"]  # 4 bytes: a 2-byte character is never cut
    assert first_sentence([]) == [] and prefix_bytes([], 75) == []


def test_textrank_prefers_central_sentences_and_keeps_document_order() -> None:
    picked = textrank(DOC, k=2)
    assert "The weather was mild." not in picked  # shares no word with the others
    assert picked == [s for s in DOC if s in picked]
    assert textrank(["One.", "Two."], k=3) == ["One.", "Two."]
    # no similarity at all: ties go to the earlier sentences (LEAD)
    assert textrank(["Alpha beta.", "Gamma delta.", "Epsilon zeta."], k=2) == ["Alpha beta.", "Gamma delta."]


def test_pagerank_is_the_stationary_distribution() -> None:
    graph = sentence_graph(DOC)
    ranks = pagerank(graph)
    assert sum(ranks.values()) == pytest.approx(1.0)
    matrix = nx.google_matrix(graph, alpha=0.85, nodelist=list(graph.nodes), weight="weight")
    vector = [ranks[n] for n in graph.nodes]
    stepped = [sum(vector[i] * float(matrix[i, j]) for i in range(len(vector))) for j in range(len(vector))]
    assert stepped == pytest.approx(vector, abs=1e-9)
    assert ranks[2] == min(ranks.values())  # the isolated sentence
    star = nx.Graph([(0, 1), (0, 2), (0, 3)])
    star_ranks = pagerank(star)
    assert max(star_ranks, key=star_ranks.get) == 0


def test_baseline_registry() -> None:
    assert BASELINES == ("first", "lead3", "prefix", "textrank")
    assert [get_baseline(m).name for m in BASELINES] == ["FIRST", "LEAD-3", "PREFIX-75", "TEXTRANK-3"]
    assert get_baseline("textrank", 1)(DOC) == textrank(DOC, 1)
    with pytest.raises(ValueError, match="unknown baseline"):
        get_baseline("oracle")


def _prepare(inputs: list[InputSource], out: Path) -> Path:
    prepare_corpus(inputs, out, PrepOptions(), show_progress=False)
    return out


def _run_baseline(data: Path, *extra: str, out_dir: Path) -> dict[str, float]:
    args = ["baseline", "--method", "first", "--data", str(data), "--output-dir", str(out_dir), *extra]
    assert cli.main(args) == 0
    (result,) = [json.loads(p.read_text()) for p in out_dir.glob("first-*.json")]
    assert result["kind"] == "baseline" and result["name"] == "FIRST"
    return result["metrics"]  # type: ignore[no-any-return]


# 618 real examples scored with rouge-score: the same prepare -> baseline -> ROUGE pipeline runs in the default
# suite in test_first_on_cnndm_matches_the_known_numbers, and the max over several references in
# test_eval_rouge.py::test_max_over_references_is_taken_per_metric
@pytest.mark.slow
def test_first_on_scitldr_matches_the_known_numbers(tmp_path: Path) -> None:
    source = shared_data_dir() / "scitldr-a" / "test.jsonl"
    stream = InputSource(
        name=str(source), split="test", open=lambda report: read_input("jsonl", source, ReaderConfig(), report=report)
    )
    data = _prepare([stream], tmp_path / "scitldr")
    scores = _run_baseline(data, out_dir=tmp_path / "out")
    # 618 examples with 2-4 references each, max over references (rouge-score 0.1.2, stemming)
    assert scores["rouge1"] == pytest.approx(31.3, abs=0.1)
    assert scores["rouge2"] == pytest.approx(12.3, abs=0.1)
    assert scores["rougeL"] == pytest.approx(25.0, abs=0.1)


def test_first_on_cnndm_matches_the_known_numbers(tmp_path: Path) -> None:
    stories = shared_data_dir() / "cnndm-250" / "stories"
    stream = InputSource(
        name=str(stories), split="test", open=lambda report: read_input("cnndm", stories, ReaderConfig(), report=report)
    )
    data = _prepare([stream], tmp_path / "cnndm")
    scores = _run_baseline(data, "--refs", "first", out_dir=tmp_path / "out")  # vs the first highlight
    assert scores["rouge1"] == pytest.approx(25.8, abs=0.1)
    assert scores["rouge2"] == pytest.approx(11.4, abs=0.1)
    assert scores["rougeL"] == pytest.approx(22.0, abs=0.1)
