"""Import a script of ``benchmarks/`` as a module, for the tests that exercise benchmark code in-process.

The scripts are not a package; each is registered in ``sys.modules`` under its file name so that
dataclasses and pickling inside it resolve.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

#: The marks of a test that runs the Triton kernels' code on CPU tensors (Triton's interpreter, which
#: ``tests/conftest.py`` turns on without a GPU).
NEEDS_TRITON_INTERPRETER = [
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the Triton kernels' interpreter"),
]


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as the module ``name``, with ``benchmarks/`` on ``sys.path`` (as
    when the script runs: the scripts import their neighbours by name, and spawned workers import them)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
