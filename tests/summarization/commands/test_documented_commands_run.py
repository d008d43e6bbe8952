"""Issue 28, item 16: the cheap documented ``scg-summarize`` commands run, as the docs write them,
on a tiny synthetic corpus (every documented command's flags are parsed by
``test_newcomer_docs.py::test_every_documented_command_parses``).

The commands of the pages in :data:`WALK` run in the order of the page, in one folder, each in
process through ``cli.main``: a page's later commands read what its earlier ones wrote (the
corpus, the run, the summaries). Only budgets are added: a synthetic corpus of 120/20/20
examples, training stopped after a few steps, evaluation on 10 examples. A command whose input
is not there (a reader's own corpus, real data under ``../shared/data``, a file written by
another page's run) is skipped with its reason; ``data/cnndm`` and the input files of
``evaluation.md`` stand for the reader's corpus and articles (the synthetic corpus, two articles).
A command that runs and exits non-zero fails the test, with its output.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from scg_summarize import cli
from scg_summarize.train.config_loading import available_configs

from .test_newcomer_docs import ROOT, blocks, documented_commands, shell_commands

pytestmark = pytest.mark.slow

#: the pages walked, in order (the summarizer's quick start trains the run evaluation.md uses)
WALK = ("docs/summarizer.md", "docs/data.md", "docs/evaluation.md")
#: commands too long for a test whatever the budget (the demo trains several models)
NOT_RUN = {"demo": "trains several models (its own tests run it)"}
#: the named configurations (a ``--config`` value that is not a file)
CONFIGS = frozenset(available_configs(include_variants=True))
#: flags whose value is a path the command reads
INPUTS = ("--data", "--run", "--input", "--config")
ARTICLE = "the storm hit the coast on monday . thousands of homes lost power and schools were closed ."


@dataclass(kw_only=True, slots=True)
class Outcome:
    where: str
    argv: list[str]
    code: int | None  # None: not run
    note: str


def budget(argv: list[str]) -> list[str]:
    """``argv`` with the test's budget flags appended (the documented flags stay as written)."""
    command = argv[0]
    if command == "prepare" and "--format" in argv and argv[argv.index("--format") + 1] == "synthetic":
        return [*argv, "--n-train", "120", "--n-valid", "20", "--n-test", "20", "--quiet"]
    if command == "train" and "--resume" not in argv and "--list" not in argv:
        return [*argv, "--set", "train.max_steps=4", "--set", "train.epochs=1", "--set", "train.threads=1"]
    if command == "train" and "--resume" in argv:
        return [*argv, "--set", "train.max_steps=6"]
    if command == "evaluate" and "--limit" not in argv:
        return [*argv, "--limit", "10"]
    return argv


def missing_input(argv: list[str], folder: Path) -> str | None:
    """Why ``argv`` cannot run in ``folder`` (an input it reads is not there), or None."""
    paths = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in INPUTS]
    if argv[0] == "compare":
        paths += [word for word in argv[1:] if not word.startswith("-")]
    for path in paths:
        if path == "-" or path in CONFIGS:  # stdin; a named configuration
            continue
        path = path.split("=", 1)[1] if "=" in path and not path.startswith(("/", ".")) else path
        if path.startswith("../shared/"):  # the real corpora: minutes to prepare, where they are there at all
            there = "there, but" if (ROOT / path).exists() else "absent, and"
            return f"real data ({path}): {there} not run in the test"
        there = folder / path
        if not (there.exists() or any(there.parent.glob(f"{there.name}.*"))):  # a parallel corpus: PREFIX.article.txt
            return f"its input {path} is not there"
    return None


def run_command(argv: list[str], folder: Path) -> tuple[int, str]:
    out = io.StringIO()
    stdin, cwd = sys.stdin, Path.cwd()
    try:
        os.chdir(folder)
        sys.stdin = io.StringIO(ARTICLE + "\n")  # `--input -` reads an article from stdin
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = cli.main(argv)
    finally:
        os.chdir(cwd)
        sys.stdin = stdin
    return code, out.getvalue()


def prepare_stand_ins(folder: Path) -> None:
    """The reader's corpus and articles that evaluation.md assumes."""
    if (folder / "data" / "syn").is_dir() and not (folder / "data" / "cnndm").exists():
        shutil.copytree(folder / "data" / "syn", folder / "data" / "cnndm")
    (folder / "articles.txt").write_text(f"{ARTICLE}\n{ARTICLE} the power came back on tuesday .\n")
    (folder / "docs.jsonl").write_text(json.dumps({"document": ARTICLE}) + "\n")


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory, single_thread: None) -> list[Outcome]:
    folder = tmp_path_factory.mktemp("documented")
    outcomes = []
    for page in WALK:
        if page == "docs/evaluation.md":
            prepare_stand_ins(folder)
        env: dict[str, str] = {}
        for line, block in blocks(ROOT / page, "bash"):
            for offset, argv in shell_commands(block, env):
                where = f"{page}:{line + offset}"
                if not argv or argv[0] in NOT_RUN or "..." in argv:
                    note = NOT_RUN.get(argv[0], "elided") if argv else "no command"
                    outcomes.append(Outcome(where=where, argv=argv, code=None, note=note))
                    continue
                reason = missing_input(argv, folder)
                if reason is not None:
                    outcomes.append(Outcome(where=where, argv=argv, code=None, note=reason))
                    continue
                code, output = run_command(budget(argv), folder)
                outcomes.append(Outcome(where=where, argv=argv, code=code, note=output[-2000:]))
    return outcomes


def test_the_cheap_documented_commands_run(walked: list[Outcome]) -> None:
    failed = [f"{o.where}: scg-summarize {shlex.join(o.argv)} exited {o.code}\n{o.note}" for o in walked if o.code]
    assert not failed, "\n\n".join(failed)
    ran = {o.argv[0] for o in walked if o.code == 0}
    # the walk reaches every cheap command: a page whose commands stopped chaining would run fewer
    assert {"prepare", "train", "summarize", "evaluate", "baseline", "report", "visualize"} <= ran, ran


def test_the_walk_says_why_a_command_was_not_run(walked: list[Outcome]) -> None:
    skipped = [o for o in walked if o.code is None]
    assert all(o.note for o in skipped)
    real = [o for o in skipped if "../shared/" in " ".join(o.argv)]
    assert all("real data" in o.note for o in real)


def test_the_input_check_skips_what_is_not_there(tmp_path: Path) -> None:
    assert missing_input(["summarize", "--run", "runs/c2f", "--input", "a.txt"], tmp_path) is not None
    assert "real data" in (missing_input(["prepare", "--input", "test=../shared/data/x"], tmp_path) or "")
    (tmp_path / "runs" / "c2f").mkdir(parents=True)
    (tmp_path / "a.txt").write_text("x\n")
    assert missing_input(["summarize", "--run", "runs/c2f", "--input", "a.txt"], tmp_path) is None


def _real_data_prepares() -> list[object]:
    """The documented ``prepare`` commands of the real corpora under ``../shared/data``, one per
    distinct command (the same command writing to another folder is run once)."""
    seen: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    for where, argv in documented_commands():
        if argv[:1] == ["prepare"] and "..." not in argv and any("../shared/data/" in word for word in argv):
            key = tuple(word for i, word in enumerate(argv) if "--output" not in argv[i - 1 : i + 1])
            seen.setdefault(key, (where, argv))
    return [pytest.param(where, argv, id=where) for where, argv in seen.values()]


@pytest.mark.parametrize(("where", "argv"), _real_data_prepares())
def test_a_documented_prepare_of_real_data_runs(where: str, argv: list[str], tmp_path: Path) -> None:
    """Issue 28, item 16: mal.md and abs.md prepared debian-descriptions without ``--skip-bad`` and
    failed as written (23 duplicate ids). Each documented prepare of a real corpus runs in full
    where the data is there (``../shared/data``, next to the checkout), outputs in ``tmp_path``."""
    shared = ROOT.parent / "shared" / "data"
    folders = {word.split("../shared/data/", 1)[1].split("/", 1)[0] for word in argv if "../shared/data/" in word}
    absent = sorted(name for name in folders if not (shared / name).is_dir())
    if absent:
        pytest.skip(f"real data absent: {', '.join(absent)} (not in {shared})")
    resolved = [word.replace("../shared/data/", f"{shared}/") for word in argv]
    resolved[resolved.index("--output") + 1] = "prepared"  # in tmp_path (the docs write to /tmp, runs/...)
    reason = missing_input(resolved, tmp_path)
    if reason is not None:
        pytest.skip(f"{where}: {reason}")  # an input written by an earlier command of its page
    code, output = run_command([*resolved, "--quiet"], tmp_path)
    assert code == 0, f"{where}: scg-summarize {shlex.join(argv)} exited {code}\n{output[-2000:]}"
