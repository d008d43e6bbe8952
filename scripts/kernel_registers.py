"""Registers, spills and shared memory of every Triton kernel compiled for Hopper (sm_90) without a GPU
(`scg_summarize.kernels.compile_check`; the table of docs/kernels.md). Exit status 1 if any kernel spills.

Run it without ``TRITON_INTERPRET=1`` (the interpreter turns kernels into Python functions)::

    python scripts/kernel_registers.py [--dtype bf16|fp32] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from scg_summarize.kernels.compile_check import check_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    usages = check_all(args.dtype)
    if args.json:
        print(json.dumps([asdict(u) for u in usages]))
    else:
        print(f"{'kernel':<18} {'variant':<12} {'regs':>5} {'stack':>6} {'local':>6} {'shared':>7} {'s':>6}")
        for u in usages:
            print(
                f"{u.kernel:<18} {u.variant:<12} {u.registers:>5} {u.stack_bytes:>6} {u.local_bytes:>6} "
                f"{u.shared_bytes:>7} {u.seconds:>6}"
            )
    return 1 if any(u.stack_bytes or u.local_bytes for u in usages) else 0


if __name__ == "__main__":
    sys.exit(main())
