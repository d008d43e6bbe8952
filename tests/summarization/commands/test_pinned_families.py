"""A tiny model of each family trained for a fixed number of steps gives pinned numbers (issue 31).

The runs are those of docs/results.md section 8 (the same commands, through the CLI): a change that
moves a result (a model, an objective, the data order, decoding) shows up here as a pinned value that
no longer holds. When a change is meant to move them, rerun the section
(``python scripts/reproduce.py 8``), regenerate its table (``--write --runs-root``) and update the
values below in the same commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scg_summarize.cli import main

from ..eval_support import one_thread

STEPS = ["train.max_steps=100", "train.epochs=100", "train.seed=1", "train.threads=1"]
#: family config -> (last validation perplexity, test perplexity, the greedy summary of test example syn-2-0)
PINNED = {
    "tiny-C2F": (276.792239, 267.0539072746095, "zaistein zaistein zaistein guskustok guskustok"),
    "tiny-PAULUS-ML": (
        40.757772,
        31.594929249824155,
        "kraitrul kouvobes kouvobes kouvobes kouvobes skinougin skinougin",
    ),
    "tiny-ABS": (288.766574, 271.486017687838, "zaistein"),
    "tiny-MAL": (271.641981, 270.66262201661704, "sailigos sukrou sukrou sukrou guskustok"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pinned") / "data"
    args = ["--n-train", "400", "--n-valid", "40", "--n-test", "40", "--seed", "0", "--quiet"]
    assert main(["prepare", "--format", "synthetic", "--output", str(out), *args]) == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("config", sorted(PINNED))
def test_a_tiny_model_of_each_family_gives_its_pinned_numbers(corpus: Path, tmp_path: Path, config: str) -> None:
    run = tmp_path / "run"
    sets = [a for kv in STEPS for a in ("--set", kv)]
    with one_thread():
        assert (
            main(["train", "--config", config, "--data", str(corpus), "--out", str(run), "--rouge", "--quiet", *sets])
            == 0
        )
    valid_ppl, test_ppl, summary = PINNED[config]
    training = json.loads((run / "training.json").read_text())
    assert training["steps"] == 100 and training["stopped_by"] == "max_steps"
    assert training["valid_ppl"] == pytest.approx(valid_ppl, rel=1e-6)
    assert json.loads((run / "results.json").read_text())["metrics"]["ppl"] == pytest.approx(test_ppl, rel=1e-6)
    first = json.loads((run / "test.summaries.jsonl").read_text().splitlines()[0])
    assert (first["id"], first["summary"]) == ("syn-2-0", summary)
