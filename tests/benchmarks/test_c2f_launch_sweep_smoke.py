"""Smoke test of ``benchmarks/c2f_launch_sweep.py`` on the CPU (Triton's interpreter, tiny sizes, two
settings per part): a setting reaches the launchers and is undone, every setting's step agrees with the
current one, a step with other draws does not, and the report ranks the settings. (Timings are never
asserted.)"""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from _benchmark_loader import NEEDS_TRITON_INTERPRETER, load_benchmark

pytestmark = NEEDS_TRITON_INTERPRETER


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("c2f_launch_sweep")


def test_a_setting_reaches_the_launchers_and_is_undone(bench: Any) -> None:
    from scg_summarize.kernels.backend import triton_module

    tf, tc = triton_module("fine"), triton_module("coarse")
    before = (tf.forward_meta(1, 40, 512), tc.launch_meta(1000, 512, 1, "multinomial"), dict(tf.FORWARD_OPTIONS))
    read = bench.Setting(part="read", block=64, tile=32, warps=4, stages=3)
    with bench.applied(read):
        meta, n_split = tf.forward_meta(1, 40, 512)
        assert (meta["BLOCK_H"], meta["TILE_H"], n_split) == (64, 32, 8)
        assert tf.FORWARD_OPTIONS == {"num_warps": 4, "num_stages": 3}
    with bench.applied(bench.Setting(part="coarse", block=32, tile=64, warps=8, stages=3)):
        blocks, choice = tc.launch_meta(1000, 512, 1, "multinomial")
        assert (blocks["BLOCK_M"], blocks["BLOCK_H"], choice["BLOCK_P"]) == (32, 64, 32)  # 32 blocks of 32
        assert tc.OPTIONS == {"num_warps": 8, "num_stages": 3}
    assert (tf.forward_meta(1, 40, 512), tc.launch_meta(1000, 512, 1, "multinomial"), tf.FORWARD_OPTIONS) == before
    assert bench.current("read") in bench.grid("read") and bench.current("coarse") in bench.grid("coarse")


def test_agreement_sees_other_draws(bench: Any) -> None:
    ctx, w, attn = torch.randn(2, 4), torch.full((2, 1), 1.0), torch.rand(2, 1, 3)
    want = SimpleNamespace(idx=torch.tensor([[1], [0]]), context=ctx, weights=w, word_attn=attn)
    close = SimpleNamespace(idx=want.idx.clone(), context=ctx * (1 + 1e-7), weights=w, word_attn=attn)
    other = SimpleNamespace(idx=torch.tensor([[1], [1]]), context=ctx, weights=w, word_attn=attn)
    shifted = SimpleNamespace(idx=want.idx.clone(), context=ctx + 0.1 * ctx.abs().max(), weights=w, word_attn=attn)
    assert bench.agrees(close, want, torch.float32)
    assert not bench.agrees(other, want, torch.float32)
    assert not bench.agrees(shifted, want, torch.float32)


def test_a_cpu_sweep_and_its_report(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    full = bench.grid
    monkeypatch.setattr(bench, "grid", lambda part: [bench.current(part), *[s for s in full(part)[-1:]]])
    args = argparse.Namespace(device="cpu", dtype="fp32", chunks=[20], ks=[2], parts=["read", "coarse"])
    args.b2b, args.repeats = 2, 1
    result = bench.run(args)
    assert len(result["rows"]) == 4 and all(r["agrees"] for r in result["rows"])
    text = bench.to_markdown(result, "cmd")
    for part in ("read", "coarse"):
        assert text.count("(current) | ") >= 1 and f"## {part}: current" in text
    assert "| yes |" in text and "**no**" not in text
