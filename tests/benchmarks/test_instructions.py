"""``benchmarks/instructions.py`` without valgrind: the child's protocol of dumps (what the parent
parses), the parsing of callgrind's dump files, the per-step arithmetic and the chain's split.
The counts themselves need valgrind and are never asserted here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest
from _benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def ins() -> Any:
    return load_benchmark("instructions")


def test_child_dumps_three_parts_per_implementation(ins: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per implementation (hand, tracked, Cached, Declared): instrumentation on, a start dump,
    a dump after the short and after the long part, instrumentation off, and the right number of
    steps between the dumps (counted through the step functions the child runs)."""
    events: list[str] = []
    monkeypatch.setattr(ins, "_control", lambda *args: events.append(" ".join(args)))
    work = sys.modules["small_workloads"]
    real_steps = work.steps

    def counting_steps(model: Any) -> Any:
        hand, modes = real_steps(model)

        def counted(name: str, fn: Any) -> Any:
            def run() -> None:
                events.append(f"step {name}")
                fn()

            return run

        return counted("hand", hand), {m: counted(m, f) for m, f in modes.items()}

    monkeypatch.setattr(ins, "steps", counting_steps)
    ins.child(argparse.Namespace(workload="toy", batch=2, hidden=0, short=1, long=3))
    expected: list[str] = []
    for impl in ins.IMPLS:
        expected += [f"step {impl}"] * 5  # the uninstrumented warm-up
        expected += ["--instr=on", "--dump=start", f"step {impl}", "--dump=n1"]
        expected += [f"step {impl}"] * 3 + ["--dump=n3", "--instr=off"]
    assert events == expected


def test_totals_and_per_step(ins: Any, tmp_path: Path) -> None:
    out = tmp_path / "cg.out"
    # four functions: start, short (10 steps), long (30); dumps 10-12 sort after 9 only numerically
    irs = [7, 1000, 3000, 5, 2000, 8000, 1, 100, 300, 2, 4000, 12000]
    for i, n in enumerate(irs, start=1):  # (callgrind numbers its dumps from 1)
        (tmp_path / f"cg.out.{i}").write_text(f"version: 1\ncmd: python\nevents: Ir Bcm\nsummary: {n} {n // 10}\n")
    (tmp_path / "cg.out").write_text("events: Ir\nsummary: 99\n")  # the final dump at exit: not a part
    counts = ins._totals(out)
    assert counts == [{"Ir": n, "Bcm": n // 10} for n in irs]
    assert ins.per_step(counts, 10, 30) == [
        {"Ir": 100.0, "Bcm": 10.0},
        {"Ir": 300.0, "Bcm": 30.0},
        {"Ir": 10.0, "Bcm": 1.0},
        {"Ir": 400.0, "Bcm": 40.0},
    ]
    with pytest.raises(SystemExit, match="5 callgrind dumps, expected 3 per measured function"):
        ins.per_step(counts[:5], 10, 30)
    (tmp_path / "cg.out.13").write_text("events: Ir\n")
    with pytest.raises(SystemExit, match="no events or totals in callgrind dump"):
        ins._totals(out)


def test_workload_row_ratios(ins: Any) -> None:
    """Instructions, and with the cache simulation L1 misses and mispredicted branches, each
    summed over its events and divided by the hand-written step's."""
    got = [
        {"Ir": 1000.0 * k, "I1mr": 1.0 * k, "D1mr": 2.0 * k, "D1mw": 3.0 * k, "Bcm": 4.0 * k, "Bim": 6.0 * k}
        for k in (1, 2, 3, 4)  # hand, tracked, cached, declared
    ]
    row = ins.workload_row("toy", 32, 0, got)
    assert row["hidden"] is None
    assert row["instructions"]["declared"] == 4000.0
    assert row["ratio"] == {"tracked": 2.0, "cached": 3.0, "declared": 4.0}
    assert row["l1_misses"]["hand"] == 6.0 and row["mispredicted"]["cached"] == 30.0
    assert row["mispredicted_ratio"] == {"tracked": 2.0, "cached": 3.0, "declared": 4.0}
    rendered = ins.render(
        {"torch": "x", "short": 10, "long": 30, "command": "cmd", "cache_sim": True, "workloads": [row]}
    )
    assert f"| {row['label']} | 32 | - | 2.000 | 3.000 | 4.000 | 2.000 | 3.000 | 4.000 |" in rendered
    plain = ins.workload_row("sbn", 32, 32, [{"Ir": 1000.0 * k} for k in (1, 2, 3, 4)])
    assert "l1_misses" not in plain and plain["ratio"]["tracked"] == 2.0


def test_chain_split_forward_rest_and_slopes(ins: Any) -> None:
    """Counts linear in N (forward a + b N, whole step c + d N for the hand-written step, then
    tracked and Declared) give back the forward, the step minus the forward, and the slopes b
    and d − b."""
    lo, hi = ins.CHAIN_NS
    impls = ["hand", *ins.CHAIN_MODES]
    fwd = {k: (1e5 * (i + 1), 1e4 * (i + 1)) for i, k in enumerate(impls)}
    whole = {k: (1e6 * (i + 1), 5e4 * (i + 1)) for i, k in enumerate(impls)}
    got = [x for n in (lo, hi) for k in impls for x in (fwd[k][0] + fwd[k][1] * n, whole[k][0] + whole[k][1] * n)]
    split = ins.chain_split(got)
    assert split["per_n"][str(lo)]["hand forward"] == 1e5 + 1e4 * lo
    assert split["per_n"][str(hi)]["declared surrogate + backward"] == (3e6 + 1.5e5 * hi) - (3e5 + 3e4 * hi)
    assert split["per_node"]["hand forward"] == pytest.approx(1e4)
    assert split["per_node"]["hand assembly + backward"] == pytest.approx(4e4)
    assert split["per_node"]["declared forward"] == pytest.approx(3e4)
    assert split["per_node"]["declared surrogate + backward"] == pytest.approx(1.2e5)
    rendered = ins.render(
        {
            "torch": "x",
            "short": 10,
            "long": 30,
            "command": "cmd",
            "workloads": [
                {
                    "label": "toy",
                    "batch": 32,
                    "hidden": None,
                    "instructions": {"hand": 2.0e6},
                    "ratio": {"tracked": 1.5, "cached": 1.25, "declared": 1.125},
                }
            ],
            "chain": split,
        }
    )
    assert "| toy | 32 | - | 2.000 | 1.500 | 1.250 | 1.125 |" in rendered
    assert "| per node | 10.0 | 40.0 | 20.0 | 80.0 | 30.0 | 120.0 |" in rendered


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "--jobs: expected at least 1, got 0"),
        (["--short", "5", "--long", "5"], "expected 0 <= --short < --long, got --short 5 and --long 5"),
        (["--short", "-1"], "expected 0 <= --short < --long, got --short -1 and --long 30"),
    ],
)
def test_bad_arguments_are_refused_before_any_child(
    ins: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    monkeypatch.setattr(sys, "argv", ["instructions.py", *argv])
    monkeypatch.setattr(ins, "run_child", lambda *a, **k: pytest.fail("a child was started"))
    with pytest.raises(SystemExit) as exc:
        ins.main()
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_pieces_child_and_per_operation(ins: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--pieces``: the child counts every piece in `node_pieces.pieces` order (each run once per
    counted step); a piece's instructions per operation are its count minus its ``minus`` piece's
    (for ``scg.sample`` the empty graph's too), over `PIECE_CALLS`; the table lists each."""
    pieces = sys.modules["node_pieces"]
    events: list[str] = []
    monkeypatch.setattr(ins, "_control", lambda *args: events.append(" ".join(args)))
    ins.child(argparse.Namespace(workload="pieces", batch=0, hidden=0, short=1, long=2))
    table = pieces.pieces()
    assert events.count("--dump=start") == len(table) and events.count("--dump=n2") == len(table)
    counts = {key: 1000.0 * (i + 1) for i, key in enumerate(table)}
    per = pieces.per_operation(counts)
    assert "loop" not in per and "empty graph" not in per  # (the subtracted pieces are not reported)
    k = pieces.PIECE_CALLS
    assert per["call"] == (counts["call"] - counts["loop"]) / k
    assert per["location"] == (counts["location"] - counts["call"]) / k
    assert per["scg.cost"] == (counts["scg.cost"] - counts["empty graph"]) / k
    assert per["scg.sample"] == (counts["scg.sample"] - counts["hand draw"] - counts["empty graph"]) / k
    lines = pieces.render(per)
    assert sum(line.startswith("| ") for line in lines) == len(per) + 1  # a row per piece, and the header
