"""Every Triton kernel compiles for Hopper (sm_90) without a GPU and does not spill registers.

Runs ``python -m scg_summarize.kernels.compile_check`` in a subprocess without ``TRITON_INTERPRET``
(the interpreter, switched on for the other kernel tests, turns kernels into Python functions that do
not compile). About 30 s on two cores with an empty Triton cache, hence ``slow``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest


def _compiler_available() -> bool:
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _compiler_available(), reason="triton with GPUTarget/ASTSource is not installed"),
]

KERNELS = {"_coarse_blocks", "_coarse_combine", "_fine_forward", "_fine_backward", "_topk_blocks", "_topk_combine"}


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_kernels_compile_for_sm90_without_spills(dtype: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silences triton 3.9's warning; fusion is the default
    proc = subprocess.run([sys.executable, "-m", "scg_summarize.kernels.compile_check", "--json", "--dtype", dtype],
                          capture_output=True, text=True, env=env, timeout=600)
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-2000:]
    usages = json.loads(lines[-1])
    assert {u["kernel"] for u in usages} == KERNELS
    for u in usages:
        assert u["stack_bytes"] == 0 and u["local_bytes"] == 0, f"{u['kernel']} ({u['variant']}) spills: {u}"
        assert 0 < u["registers"] <= 255
    assert proc.returncode == 0, proc.stderr[-2000:]
