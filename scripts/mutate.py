"""Mutation sweep: which small changes to the maths does the test suite catch?

Each mutant of ``scripts/mutants.toml`` is one small patch (a sign flipped, a term dropped, a mask
skipped, an off-by-one). The script exports a commit (default ``HEAD``) into a scratch copy with
``git archive`` (the working tree is never touched), checks that the mapped test files pass on the
unmutated copy (tests failing there are deselected, and listed), then, for each mutant alone:
patches the copy, runs its mapped test files (``pytest -x -q``, ``OMP_NUM_THREADS=1``, no bytecode
caches so a restored file is never shadowed by a stale ``.pyc``) and restores the file. A mutant is
*killed* when the tests fail (or time out), *survived* when they pass. The report goes to
``OUT.json`` and ``OUT.md``.

Usage::

    python scripts/mutate.py --out /tmp/mutation [--rev HEAD] [--only ID ...] [--timeout 300]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = Path(__file__).with_name("mutants.toml")


@dataclass(kw_only=True, slots=True)
class Mutant:
    """One patch: ``old`` (occurring exactly once in the first of ``files`` that exists) replaced by ``new``."""

    id: str
    family: str
    what: str
    files: list[str]
    old: str
    new: str
    tests: list[str]
    equivalent: str = ""


@dataclass(kw_only=True, slots=True)
class Outcome:
    """The result of one mutant: ``killed``, ``survived`` or ``invalid`` (the patch did not apply)."""

    id: str
    family: str
    what: str
    status: str
    seconds: float
    tests: list[str] = field(default_factory=list)
    detail: str = ""


def load_mutants(path: Path = MUTANTS) -> list[Mutant]:
    """The mutants of ``path``; a ``tests`` string names a list in ``[defaults]``."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    defaults = data.get("defaults", {})
    out = []
    for i, raw in enumerate(data.get("mutant", [])):
        tests = raw.get("tests", [])
        if isinstance(tests, str):
            if tests not in defaults:
                raise ValueError(f"{path}: mutant #{i} ({raw.get('id')}): unknown test list {tests!r}")
            tests = defaults[tests]
        missing = {"id", "family", "what", "file", "old", "new"} - set(raw)
        if missing:
            raise ValueError(f"{path}: mutant #{i} ({raw.get('id')}) lacks {sorted(missing)}")
        files = [raw["file"]] if isinstance(raw["file"], str) else list(raw["file"])
        out.append(
            Mutant(
                id=raw["id"],
                family=raw["family"],
                what=raw["what"],
                files=files,
                old=raw["old"],
                new=raw["new"],
                tests=list(tests),
                equivalent=raw.get("equivalent", ""),
            )
        )
    ids = [m.id for m in out]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{path}: duplicate mutant ids")
    return out


def export(rev: str, dest: Path) -> None:
    """The tree of ``rev`` (committed files only) under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def resolve_tests(copy: Path, patterns: list[str]) -> list[str]:
    """The test files of ``patterns`` (globs relative to the copy) that exist, sorted, unique."""
    found: set[str] = set()
    for pattern in patterns:
        for path in glob.glob(str(copy / pattern), recursive=True):
            found.add(str(Path(path).relative_to(copy)))
    return sorted(found)


def environment(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        PYTHONPATH=f"{copy}{os.pathsep}{copy / 'examples' / 'summarization'}",
    )
    return env


def pytest(
    copy: Path, tests: list[str], deselect: list[str], timeout: float, extra: list[str] | None = None
) -> tuple[int, str, float]:
    """Run pytest in ``copy``; returns (exit status, output tail, seconds); status -9 on time-out."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(extra or ["-x"]), *tests]
    for node in deselect:
        cmd += ["--deselect", node]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=copy, env=environment(copy), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -9, "timed out", time.perf_counter() - start
    return proc.returncode, (proc.stdout + proc.stderr)[-1500:], time.perf_counter() - start


def check_imports(copy: Path) -> None:
    """The copy's scg and scg_summarize are the ones imported (not the working tree's)."""
    code = "import scg, scg_summarize; print(scg.__file__); print(scg_summarize.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=copy, env=environment(copy), capture_output=True, text=True, check=True
    ).stdout.split()
    for path in out:
        if not Path(path).resolve().is_relative_to(copy.resolve()):
            raise RuntimeError(f"the mutation copy imports {path}, not a file under {copy}")


def failing_nodes(output: str) -> list[str]:
    """Node ids of the ``FAILED``/``ERROR`` lines of pytest's short summary (``-ra``)."""
    nodes = []
    for line in output.splitlines():
        for tag in ("FAILED ", "ERROR "):
            if line.startswith(tag):
                nodes.append(line[len(tag) :].split(" - ")[0].strip())
    return nodes


def _one(copy: Path, m: Mutant, deselect: list[str], timeout: float) -> Outcome:
    """Apply ``m`` alone to ``copy``, run its tests, restore the file."""
    where = next((f for f in m.files if (copy / f).is_file()), m.files[0])
    target = copy / where
    tests = resolve_tests(copy, m.tests)
    text = target.read_text(encoding="utf-8") if target.is_file() else ""
    count = text.count(m.old)
    if count != 1 or not tests:
        why = f"'old' occurs {count} times in {where}" if count != 1 else "no mapped test file exists"
        return Outcome(id=m.id, family=m.family, what=m.what, status="invalid", seconds=0.0, tests=tests, detail=why)
    target.write_text(text.replace(m.old, m.new), encoding="utf-8")
    try:
        status, output, seconds = pytest(copy, tests, deselect, timeout)
    finally:
        target.write_text(text, encoding="utf-8")
    if status == 0:
        result, detail = "survived", ""
    elif status == 5:
        result, detail = "invalid", "no test collected"
    else:
        result = "killed"
        detail = "timed out" if status == -9 else "; ".join(failing_nodes(output)[:2]) or output[-300:]
    return Outcome(
        id=m.id, family=m.family, what=m.what, status=result, seconds=round(seconds, 1), tests=tests, detail=detail
    )


def _prepare(copy: Path) -> None:
    """Drop stale caches and precompile with hash-checked ``.pyc`` files: a patched or restored
    source never runs from a cache of other text, and unpatched modules are not recompiled by every run."""
    for cache in copy.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", str(copy)],
        check=False,
        capture_output=True,
    )


def run(
    mutants: list[Mutant],
    rev: str,
    timeout: float,
    log: bool = True,
    baseline: bool = True,
    jobs: int = 1,
    skip: tuple[str, ...] = (),
) -> tuple[list[Outcome], dict[str, object]]:
    work = Path(tempfile.mkdtemp(prefix="scg-mutate-"))
    copies = [work / f"tree{i}" for i in range(max(jobs, 1))]
    try:
        export(rev, copies[0])
        _prepare(copies[0])
        for other in copies[1:]:
            shutil.copytree(copies[0], other, symlinks=True)
        check_imports(copies[0])
        # the unmutated baseline: every mapped file once; failing tests are deselected from then on
        all_tests = resolve_tests(copies[0], sorted({p for m in mutants for p in m.tests}))
        if baseline:
            status, output, seconds = pytest(copies[0], all_tests, [], timeout * 4, extra=["-ra"])
        else:  # the caller vouches that the mapped files pass unmutated (e.g. from an earlier sweep)
            status, output, seconds = 0, "", 0.0
        deselect = [*skip, *(failing_nodes(output) if status not in (0, 5) else [])]
        if status not in (0, 5) and len(deselect) == len(skip):
            raise RuntimeError(f"the unmutated tests fail (status {status}) and no failing node was found:\n{output}")
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], check=True, capture_output=True, text=True)
        meta: dict[str, object] = {
            "rev": sha.stdout.strip(),
            "baseline_seconds": round(seconds, 1) if baseline else None,
            "deselected": deselect,
            "test_files": all_tests,
            "jobs": len(copies),
        }
        if log:
            print(f"baseline: {len(all_tests)} files in {seconds:.0f}s; deselected {deselect}", flush=True)
        pending = queue.Queue[tuple[int, Mutant]]()
        for item in enumerate(mutants):
            pending.put(item)
        results: dict[int, Outcome] = {}
        lock = threading.Lock()

        def worker(copy: Path) -> None:  # each worker owns one copy of the tree
            while True:
                try:
                    index, m = pending.get_nowait()
                except queue.Empty:
                    return
                o = _one(copy, m, deselect, timeout)
                with lock:
                    results[index] = o
                    if log:
                        print(f"{o.status:9s} {o.seconds:6.1f}s  {o.id}  {o.detail[:120]}", flush=True)

        threads = [threading.Thread(target=worker, args=(copy,)) for copy in copies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return [results[i] for i in range(len(mutants))], meta
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(outcomes: list[Outcome], meta: dict[str, object], out: Path) -> None:
    """``out.json`` (every outcome) and ``out.md`` (score per family and the survivors)."""
    notes = {m.id: m.equivalent for m in load_mutants()}
    for o in outcomes:  # a survivor shown equivalent (the note says why) leaves the score
        if o.status == "survived" and notes.get(o.id):
            o.status, o.detail = "equivalent", notes[o.id]
    valid = [o for o in outcomes if o.status not in ("invalid", "equivalent")]
    killed = sum(o.status == "killed" for o in valid)
    score = killed / len(valid) if valid else 0.0
    all_run = [o for o in outcomes if o.status != "invalid"]
    summary = {
        "equivalent": sum(o.status == "equivalent" for o in outcomes),
        "score_with_equivalents": round(killed / len(all_run), 4) if all_run else 0.0,
        "killed": killed,
        "survived": len(valid) - killed,
        "invalid": sum(o.status == "invalid" for o in outcomes),
        "score": round(score, 4),
        **meta,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps({"summary": summary, "mutants": [asdict(o) for o in outcomes]}, indent=2) + "\n"
    )
    families: dict[str, list[Outcome]] = {}
    for o in valid:
        families.setdefault(o.family, []).append(o)
    lines = [
        f"# Mutation sweep of {meta['rev']}",
        "",
        f"{killed} of {len(valid)} mutants killed ({100 * score:.1f}%); {summary['invalid']} invalid; "
        f"{summary['equivalent']} equivalent (survivors shown to be, left out of the score; "
        f"{100 * summary['score_with_equivalents']:.1f}% with them).",
        "",
        "| family | killed | total |",
        "|---|---|---|",
    ]
    lines += [f"| {f} | {sum(o.status == 'killed' for o in os_)} | {len(os_)} |" for f, os_ in sorted(families.items())]
    lines += ["", "| mutant | status | what | seconds |", "|---|---|---|---|"]
    lines += [f"| {o.id} | {o.status} | {o.what} | {o.seconds} |" for o in outcomes]
    lines += ["", "Equivalent mutants:", ""] + [f"- {o.id}: {o.detail}" for o in outcomes if o.status == "equivalent"]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="report path (writes OUT.json and OUT.md)")
    parser.add_argument("--rev", default="HEAD", help="the commit to mutate (default HEAD)")
    parser.add_argument("--only", nargs="*", default=None, help="mutant ids to run (default: all)")
    parser.add_argument("--mutants", type=Path, default=MUTANTS, help="the mutant list (TOML)")
    parser.add_argument(
        "--tests",
        nargs="*",
        default=None,
        help="test files (globs) to run for every selected mutant instead of its mapped ones",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at the same time (one copy of the tree each)")
    parser.add_argument("--deselect", nargs="*", default=[], help="test node ids never run (say why in the report)")
    parser.add_argument("--family", default=None, help="only the mutants whose family starts with this")
    parser.add_argument(
        "--skip-baseline",
        action="store_true",
        help="do not run the unmutated tests first (only when they are known to pass)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant before it counts as killed")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        help="combine earlier reports (OUT.json files, later ones win per mutant) into --out",
    )
    args = parser.parse_args(argv)
    if args.merge:
        outcomes_by_id: dict[str, Outcome] = {}
        revs = []
        for path in args.merge:
            data = json.loads(path.read_text())
            revs.append(data["summary"]["rev"])
            for row in data["mutants"]:
                outcomes_by_id[row["id"]] = Outcome(**row)
        order = [m.id for m in load_mutants(args.mutants)]
        merged = sorted(outcomes_by_id.values(), key=lambda o: order.index(o.id) if o.id in order else len(order))
        report(merged, {"rev": " + ".join(dict.fromkeys(revs)), "merged": [str(p) for p in args.merge]}, args.out)
        print(f"merged {len(merged)} outcomes into {args.out.with_suffix('.md')}")
        return 0
    mutants = load_mutants(args.mutants)
    if args.only:
        unknown = set(args.only) - {m.id for m in mutants}
        if unknown:
            parser.error(f"unknown mutant ids: {sorted(unknown)}")
        mutants = [m for m in mutants if m.id in args.only]
    if args.family:
        mutants = [m for m in mutants if m.family.startswith(args.family)]
    if args.tests:
        for m in mutants:
            m.tests = list(args.tests)
    outcomes, meta = run(
        mutants, args.rev, args.timeout, baseline=not args.skip_baseline, jobs=args.jobs, skip=tuple(args.deselect)
    )
    report(outcomes, meta, args.out)
    valid = [o for o in outcomes if o.status != "invalid"]
    killed = sum(o.status == "killed" for o in valid)
    print(f"{killed}/{len(valid)} killed; report: {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
