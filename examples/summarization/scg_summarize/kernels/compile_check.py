"""Compile every Triton kernel for Hopper (sm_90) without a GPU and report registers and spills.

The Triton wheel bundles ``ptxas`` and ``cuobjdump``: ``triton.compile`` with an explicit
``GPUTarget("cuda", 90, 32)`` produces a real sm_90 cubin on a CPU-only machine, and
``cuobjdump --dump-resource-usage`` reads its registers per thread, stack (spill) bytes and shared
memory. Each kernel is compiled with the constexprs and launch options its launcher would use for the
paper's shapes (``N=40`` words, ``H=512`` padded hidden size, ``k=3``, ``M=1000`` chunks, a 50k vocabulary)
and pointer alignment of 16 bytes, as Triton specializes at run time.

This must run *without* ``TRITON_INTERPRET=1`` (under the interpreter ``@triton.jit`` yields interpreted
functions, which do not compile); the test runs it in a subprocess::

    python scripts/kernel_registers.py [--dtype bf16|fp32] [--json]
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Usage", "check_all", "compile_kernel", "specs"]

_INT = {"M", "N", "H", "R", "V", "n_blocks", "stride_kb", "stride_km", "stride_wb", "stride_wm", "stride_wn"}


@dataclass(frozen=True)
class Usage:
    """Resources of one compiled kernel (per thread, except shared memory per block)."""

    kernel: str
    variant: str
    registers: int
    stack_bytes: int
    local_bytes: int
    shared_bytes: int
    seconds: float


@dataclass(frozen=True)
class Spec:
    """One kernel instantiation to compile: pointer element types and constexpr values."""

    kernel: Any
    variant: str
    pointers: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, int]


def specs(
    dtype: str = "bf16", m: int = 1000, n: int = 40, hidden: int = 512, k: int = 3, vocab: int = 50_000, rows: int = 320
) -> list[Spec]:
    """The instantiations to check (``dtype`` is the storage type of the big tensors)."""
    from . import triton_coarse as tc
    from . import triton_fine as tf
    from . import triton_topk as tt

    out: list[Spec] = []
    coarse_stats = {"stats_ptr": "fp32", "cand_idx_ptr": "i32"}
    forward, _ = tf.forward_meta(k, n, hidden)
    fine_io = {"words_ptr": dtype, "wmask_ptr": "u8", "query_ptr": dtype, "rows_ptr": "i64", "idx_ptr": "i64"}
    fine_io |= {"weights_ptr": dtype, "scores_ptr": "fp32", **coarse_stats, "context_ptr": dtype, "attn_ptr": "fp32"}
    for mode in ("multinomial", "distinct", "greedy"):
        blocks, choice = tc.launch_meta(m, hidden, k, mode)
        out.append(
            Spec(
                tc._coarse_blocks,
                mode,
                {
                    "keys_ptr": dtype,
                    "query_ptr": dtype,
                    "mask_ptr": "u8",
                    "rows_ptr": "i64",
                    "seed_ptr": "i64",
                    "scores_ptr": "fp32",
                    **coarse_stats,
                },
                {**blocks, "HAS_ROWS": True},
                tc.OPTIONS,
            )
        )
        out.append(
            Spec(
                tc._coarse_combine,
                mode,
                {"scores_ptr": "fp32", **coarse_stats, "idx_ptr": "i64"},
                choice,
                tc.OPTIONS,
            )
        )
        out.append(
            Spec(
                tf._fine_read,
                f"k={k}, {mode} choice",
                fine_io,
                {**forward, **tf.read_choice(choice), "HAS_ROWS": True},
                tf.FORWARD_OPTIONS,
            )
        )
    given = {**tf.read_choice(None), "HAS_ROWS": True}
    for draws in sorted({2, k}):  # the hidden slice is wider for k <= 2 (``forward_meta``)
        out.append(
            Spec(
                tf._fine_read,
                f"k={draws}, given chunks",
                fine_io,
                {**tf.forward_meta(draws, n, hidden)[0], **given},
                tf.FORWARD_OPTIONS,
            )
        )
    bwd = tf.launch_meta(k, n, hidden)
    out.append(
        Spec(
            tf._fine_backward,
            f"k={k}",
            {
                "dctx_ptr": dtype,
                "dattn_ptr": "fp32",
                "words_ptr": dtype,
                "query_ptr": dtype,
                "idx_ptr": "i64",
                "weights_ptr": dtype,
                "attn_ptr": "fp32",
                "rows_ptr": "i64",
                "dsel_ptr": "fp32",
                "dquery_ptr": "fp32",
                "dweights_ptr": "fp32",
            },
            {**bwd, "HAS_ROWS": True, "HAS_DATTN": True},
            tf.BACKWARD_OPTIONS,
        )
    )
    blocks, combine = tt.launch_meta(rows, vocab, hidden, 5, dtype == "fp32")
    out.append(
        Spec(
            tt._topk_blocks,
            "k=5",
            {
                "hidden_ptr": dtype,
                "weight_ptr": dtype,
                "bias_ptr": dtype,
                "part_max_ptr": "fp32",
                "part_sum_ptr": "fp32",
                "cand_val_ptr": "fp32",
                "cand_idx_ptr": "i32",
            },
            {**blocks, "HAS_BIAS": True},
            tt.OPTIONS,
        )
    )
    out.append(
        Spec(
            tt._topk_combine,
            "k=5",
            {
                "part_max_ptr": "fp32",
                "part_sum_ptr": "fp32",
                "cand_val_ptr": "fp32",
                "cand_idx_ptr": "i32",
                "values_ptr": "fp32",
                "indices_ptr": "i64",
            },
            combine,
            tt.OPTIONS,
        )
    )
    return out


def _tool(name: str) -> str:
    from triton.backends.nvidia import compiler as nvidia

    return str(Path(nvidia.__file__).parent / "bin" / name)


def _resource_usage(cubin: bytes, name: str) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.cubin"
        path.write_bytes(cubin)
        text = subprocess.run(
            [_tool("cuobjdump"), "--dump-resource-usage", str(path)], capture_output=True, text=True, check=True
        ).stdout
    fields = dict(re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text))
    if "REG" not in fields:
        raise RuntimeError(f"cuobjdump gave no resource usage for {name}:\n{text}")
    return {key: int(value) for key, value in fields.items()}


def compile_kernel(spec: Spec, arch: int = 90) -> Usage:
    """Compile one instantiation for ``sm_<arch>`` and read its resource usage."""
    import time

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = spec.kernel
    names = list(fn.arg_names)
    unknown = set(spec.pointers) | set(spec.constexprs)
    missing = [a for a in names if a not in unknown and a not in _INT]
    if missing or not unknown <= set(names):
        raise ValueError(f"{fn.__name__}: the spec does not match the kernel's arguments ({missing or unknown})")
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, a in enumerate(names):
        if a in spec.constexprs:
            signature[a] = "constexpr"
        elif a in spec.pointers:
            signature[a] = "*" + spec.pointers[a]
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[a] = "i32"
    start = time.perf_counter()
    src = ASTSource(fn, signature, constexprs={(names.index(a),): v for a, v in spec.constexprs.items()}, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(spec.options))
    seconds = time.perf_counter() - start
    use = _resource_usage(compiled.asm["cubin"], fn.__name__)
    return Usage(
        fn.__name__,
        spec.variant,
        use["REG"],
        use.get("STACK", 0),
        use.get("LOCAL", 0),
        use.get("SHARED", 0),
        round(seconds, 2),
    )


def check_all(dtype: str = "bf16") -> list[Usage]:
    """Compile every kernel in :func:`specs`; raises if the interpreter is on."""
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("unset TRITON_INTERPRET to compile for a GPU target")
    return [compile_kernel(spec) for spec in specs(dtype)]
