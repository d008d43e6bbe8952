"""Issue 28, items 14 and 16: the code blocks of the docs and the README run as written.

* every ``scg-summarize`` command of a ``bash`` block parses with the current command line (its
  flags exist, its values are accepted), the block's ``VAR=...`` assignments expanded;
* every ``python`` block compiles, and (slow) each page's python blocks run in order, in one
  process, and print something (a block that runs silently does not show that it worked);
* ``.gitignore`` keeps the demo's default output out of the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scg_summarize import cli

ROOT = Path(__file__).resolve().parents[3]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_ASSIGN = re.compile(r"^(\w+)=(.*)$")
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_ENDS = {"|", "||", "&&", ";", "&", "<", ">", ">>", "2>", "2>&1", "do", "done"}


def blocks(page: Path, language: str) -> Iterator[tuple[int, str]]:
    """``(first line number, text)`` of each fenced block of ``language`` in ``page``."""
    text = page.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        if match.group(1) == language:
            yield text.count("\n", 0, match.start()) + 2, match.group(2)


def shell_commands(block: str, env: dict[str, str] | None = None) -> Iterator[tuple[int, list[str]]]:
    """``(line offset, argv after scg-summarize)`` of each ``scg-summarize`` command of a shell
    block: continuation lines joined, ``VAR=...`` assignments expanded (``env`` carries them
    from the page's earlier blocks; other variables, such as loop variables, become ``1``),
    kept up to a pipe, a redirection or the end of a loop body; ``...`` (an elided part) is kept."""
    env = {} if env is None else env
    logical: list[tuple[int, str]] = []
    start, pending = 0, ""
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            start = offset
        pending += line
        if line.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        logical.append((start, pending))
        pending = ""
    for offset, line in logical:
        expanded = _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), "1"), line)
        tokens = shlex.split(expanded, comments=True)
        if tokens and all(_ASSIGN.match(token.rstrip(";")) for token in tokens):  # A=x or A=x; B=y
            for token in tokens:
                name, value = _ASSIGN.match(token.rstrip(";")).groups()  # type: ignore[union-attr]
                env[name] = value
            continue
        for i, token in enumerate(tokens):
            if token == "scg-summarize":
                argv: list[str] = []
                for word in tokens[i + 1 :]:
                    if word in _ENDS:
                        break
                    argv.append(word.rstrip(";"))
                    if word.endswith(";"):
                        break
                yield offset, argv


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        env: dict[str, str] = {}  # a page's blocks build on each other ("S as above")
        for language in ("bash", "sh", "console"):
            for line, block in blocks(page, language):
                for offset, argv in shell_commands(block, env):
                    found.append((f"{page.relative_to(ROOT)}:{line + offset}", argv))
    return found


def _check(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """None when ``argv`` parses, else argparse's complaint. A command with an elided part
    (``...``) is checked flag by flag: each ``--flag`` must be an option of its subcommand."""
    if "..." in argv:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices.get(argv[0])
        if sub is None:
            return f"no command {argv[0]!r}"
        unknown = [
            w.split("=")[0]
            for w in argv[1:]
            if w.startswith("--") and w.split("=")[0] not in sub._option_string_actions
        ]
        return f"unrecognized arguments: {' '.join(unknown)}" if unknown else None
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit:
        return stderr.getvalue().strip().splitlines()[-1]
    return None


def test_the_command_extractor_expands_variables_and_stops_at_pipes() -> None:
    block = 'D=../data\nS="--set a=1 --set b=2"\nscg-summarize train --data $D $S \\\n    --out runs/x  # c\n'
    block += "cat f | scg-summarize summarize --run r --input - > out.txt\nfor s in 1 2; do scg-summarize x $s; done\n"
    block += "D=../d; R=runs\nscg-summarize prepare --input $D/a --output $R/b\n"
    assert list(shell_commands(block)) == [
        (2, ["train", "--data", "../data", "--set", "a=1", "--set", "b=2", "--out", "runs/x"]),
        (4, ["summarize", "--run", "r", "--input", "-"]),
        (5, ["x", "1"]),
        (7, ["prepare", "--input", "../d/a", "--output", "runs/b"]),
    ]


def test_every_documented_command_parses() -> None:
    parser = cli.build_parser()
    commands = documented_commands()
    assert len(commands) > 50  # the docs show many: a broken extractor would find none
    failures = []
    for where, argv in commands:
        if argv in ([], ["--help"]):
            continue
        problem = _check(parser, argv)
        if problem is not None:
            failures.append(f"{where}: scg-summarize {shlex.join(argv)}\n    {problem}")
    assert not failures, "\n".join(failures)


def test_the_command_check_catches_a_removed_flag() -> None:
    parser = cli.build_parser()
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_args(["demo", "--budget-minutes", "8"])  # the old demo's flag


def test_every_python_block_compiles() -> None:
    count = 0
    for page in PAGES:
        for line, block in blocks(page, "python"):
            compile(block, f"{page.relative_to(ROOT)}:{line}", "exec")
            count += 1
    assert count >= 20


def test_demo_output_is_ignored_by_git() -> None:
    assert "demo-run/" in (ROOT / ".gitignore").read_text().splitlines()


def _python_pages() -> list[Path]:
    return [page for page in PAGES if any(True for _ in blocks(page, "python"))]


@pytest.mark.slow
@pytest.mark.parametrize("page", _python_pages(), ids=lambda p: p.name)
def test_python_blocks_run_as_written(page: Path, tmp_path: Path) -> None:
    code = "\n\n".join(block for _, block in blocks(page, "python"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), f"{page.name}: the blocks ran but printed nothing"


@pytest.mark.slow
def test_getting_started_shows_that_it_learned(tmp_path: Path) -> None:
    """The first block of getting-started.md (trimmed to 51 iterations, about 2 CPU seconds)
    prints its miss rate, and the miss rate falls."""
    (line, block), *_ = blocks(ROOT / "docs" / "getting-started.md", "python")
    code = block.replace("range(151)", "range(51)")
    assert code != block
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"getting-started.md:{line}", "exec"), {"__name__": "__docs__"})
    rates = [int(m) for m in re.findall(r"(\d+)% of the reads miss", out.getvalue())]
    assert len(rates) == 2 and rates[0] > 50 and rates[1] < 20, out.getvalue()


def test_the_readme_states_each_familys_decoding_defaults() -> None:
    from scg_summarize.train.config_loading import load_config

    lines = (ROOT / "README.md").read_text().splitlines()
    rows = [line for line in lines if re.match(r"\| (c2f|paulus|mal|abs) \(`", line)]
    assert len(rows) == 4
    for row in rows:
        family, beam, words, ngram, penalty, unk = (cell.strip() for cell in row.strip("|").split("|"))
        config = load_config(re.search(r"`([\w+-]+)`", family).group(1))  # type: ignore[union-attr]
        assert config.model.family == family.split()[0]
        options = config.eval.decode
        assert (int(beam), words, ngram, float(penalty)) == (
            options.beam_size,
            f"{options.min_len}-{options.max_len}",
            str(options.no_repeat_ngram) if options.no_repeat_ngram else "none",
            options.length_penalty,
        ), row
        assert unk == "replaced" and options.unk == "replace"


def test_docstrings_use_cross_references_that_mkdocstrings_renders() -> None:
    """Sphinx roles (:class:`X`) are shown raw by mkdocstrings: the API reference uses
    ``[`X`][scg.X]`` cross-references (checked by ``mkdocs build --strict``) or inline code."""
    role = re.compile(r":(class|func|meth|mod|attr|data|exc|obj):`")
    sources = [*sorted((ROOT / "scg").rglob("*.py")), *sorted((ROOT / "examples").rglob("*.py"))]
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if role.search(line)
    ]
    rendered = (
        "data/dataset.py",
        "decode_options.py",
        "train/config.py",
        "train/config_loading.py",
        "models/config.py",
    )
    assert not [f for f in found if f.startswith("scg/") or any(r in f for r in rendered)], found[:20]
