"""Shared fixtures for the summarization data tests (synthetic inputs written per test)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if importlib.util.find_spec("scg_summarize") is None:  # not pip-installed: use the source tree
    sys.path.insert(0, str(REPO_ROOT / "examples" / "summarization"))

SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """The folder of real third-party samples (skips the test when it is absent)."""
    if not (SHARED_DATA / "README.md").is_file():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA.resolve()


def story_text(paragraphs: Sequence[str], highlights: Sequence[str]) -> str:
    """A CNN/DM ``.story`` file body."""
    parts = [f"{p}\n\n" for p in paragraphs]
    parts += [f"@highlight\n\n{h}\n\n" for h in highlights]
    return "".join(parts)


StoryWriter = Callable[..., Path]


@pytest.fixture
def write_story(tmp_path: Path) -> StoryWriter:
    """Write ``name.story`` under ``tmp_path/stories`` (or ``directory``); returns its path."""

    def write(
        name: str,
        paragraphs: Sequence[str],
        highlights: Sequence[str],
        directory: Path | None = None,
    ) -> Path:
        folder = directory or tmp_path / "stories"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.story"
        path.write_text(story_text(paragraphs, highlights), encoding="utf-8")
        return path

    return write


#: Made-up documents (no third-party text): (paragraphs, highlights).
TOY_STORIES: list[tuple[list[str], list[str]]] = [
    (
        ["Mr. Dobbs visited the Quillon museum on Tuesday. He paid $12.50 for a ticket.",
         "The museum's new wing opened in 2021, officials said."],
        ["Dobbs visited the museum", "The wing opened in 2021"],
    ),
    (
        ["Zorvath Inc. reported a profit of 3.5 million dollars.",
         "\u201cWe can't complain,\u201d said Dr. Elna Ferrow (the chief)."],
        ["Zorvath reported a profit"],
    ),
    (
        ["The river flooded the village of Pemberwick. Nobody was hurt!",
         "Residents returned home on Friday."],
        ["Pemberwick flooded, nobody hurt", "Residents went home", "Third highlight here"],
    ),
    (
        ["A small robot named Tiko learned to sort red and blue blocks.",
         "Its makers said the robot won't be sold."],
        ["Tiko the robot sorts blocks"],
    ),
]  # fmt: skip


@pytest.fixture
def toy_story_dir(tmp_path: Path, write_story: StoryWriter) -> Path:
    """A directory with the :data:`TOY_STORIES` as ``story0.story``..."""
    folder = tmp_path / "toy"
    for i, (paragraphs, highlights) in enumerate(TOY_STORIES):
        write_story(f"story{i}", paragraphs, highlights, directory=folder)
    return folder


#: examples per split of ``synthetic_corpus``: few to validate and test on, since every training run of
#: the suite on it evaluates them (40 and 30 cost ~20% more CPU per short run)
SYNTHETIC_SPLITS = {"train": 240, "valid": 16, "test": 12}


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small prepared synthetic corpus (shared by the loading tests; read-only)."""
    from scg_summarize.data import make_synthetic_corpus

    out = tmp_path_factory.mktemp("synthetic")
    sizes = SYNTHETIC_SPLITS
    make_synthetic_corpus(out, n_train=sizes["train"], n_valid=sizes["valid"], n_test=sizes["test"], seed=7)
    return out


@pytest.fixture(scope="session")
def torchrun_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment for ``torchrun`` children: ``scg`` and ``scg_summarize`` from a copy of the
    source taken once per session, one thread each (run them outside the checkout, e.g. with
    ``cwd=tmp_path``: ``python -m`` puts the working directory first on ``sys.path``).

    The children import the package when they start, minutes after pytest did, and each rank on its
    own: in a working tree being edited (several people sharing one checkout) a child can load a
    half-made edit and exit non-zero, or the two ranks can load different code. With the copy every
    child of the session runs the same code, whatever happens to the tree meanwhile.
    """
    import scg_summarize

    import scg

    root = tmp_path_factory.mktemp("source")
    for module in (scg, scg_summarize):
        source = Path(module.__file__).resolve().parent  # type: ignore[arg-type]
        shutil.copytree(source, root / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def single_thread() -> Iterator[None]:
    """torch on one thread for a whole test module (``pytestmark =
    pytest.mark.usefixtures("single_thread")``): tiny models are many times slower with
    oversubscribed threads on shared CPUs."""
    from .eval_support import one_thread

    with one_thread():
        yield


@dataclass(frozen=True)
class ShortRun:
    """A finished run of ``robust_support.train_args(corpus, path, *options)``."""

    path: Path
    options: tuple[str, ...]  #: the options after ``robust_support.SHORT``: give them to resume it or rerun it


@pytest.fixture(scope="session")
def finished_short_run(synthetic_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> ShortRun:
    """The short C2F run of the fault and signal tests (``robust_support.train_args``: 2 epochs,
    here of 2 steps, no test evaluation; the second epoch improves the validation perplexity),
    finished, trained once per session. Read-only: a test that changes a run copies it
    (``shutil.copytree``)."""
    from scg_summarize.cli import main

    from .robust_support import train_args

    finished = ShortRun(
        path=tmp_path_factory.mktemp("finished") / "run", options=("--set", "train.max_steps_per_epoch=2")
    )
    assert main(train_args(synthetic_corpus, finished.path, *finished.options)) == 0
    return finished
