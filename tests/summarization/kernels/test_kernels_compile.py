"""Every Triton kernel compiles for Hopper (sm_90) without a GPU and does not spill registers.

Runs ``python scripts/kernel_registers.py`` in a subprocess without ``TRITON_INTERPRET``
(the interpreter, switched on for the other kernel tests, turns kernels into Python functions that do
not compile). About 30 s on two cores with an empty Triton cache, hence ``slow``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Triton is not imported here: importing it before TRITON_INTERPRET is set would decorate its own
# library (tl.rand, ...) for the GPU and break the interpreter tests that run in this process.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="no triton")]

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "kernel_registers.py"
_PROBE = "from triton.backends.compiler import GPUTarget; from triton.compiler import ASTSource"

KERNELS = {
    "_coarse_blocks",
    "_coarse_combine",
    "_fine_read",
    "_fine_backward",
    "_topk_blocks",
    "_topk_combine",
}


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silences triton 3.9's warning; fusion is the default
    if subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True).returncode != 0:
        pytest.skip("this triton has no GPUTarget/ASTSource compile API")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--dtype", dtype],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-2000:]
    usages = json.loads(lines[-1])
    assert {u["kernel"] for u in usages} == KERNELS
    for u in usages:
        assert u["stack_bytes"] == 0 and u["local_bytes"] == 0, f"{u['kernel']} ({u['variant']}) spills: {u}"
        assert 0 < u["registers"] <= 255
    assert proc.returncode == 0, proc.stderr[-2000:]
