"""Where a training step's memory goes: the bytes each source line allocates, op by op.

``train_throughput.py --memory-by-line N`` runs one more step of every (eager) run under
`LineAllocations` and reports its N largest lines. An op's bytes are, on CUDA, the growth of
``torch.cuda.memory_allocated`` across it (its outputs and whatever it keeps: a copy of an operand that
a library makes inside the op counts too); on the CPU, the bytes of its outputs that are not views of
an input. Each op is charged to the innermost frame of ``scg_summarize`` or ``scg`` that called it
(``(autograd engine)`` for a backward op run on a thread with no Python frames). The totals are summed
over the whole step, forward and backward: a line run at every decoder step that allocates the size of
the source memory each time shows as (decoder steps) x (that size), which is how a memory that grows
with the document's length and the summary's is told from one that grows with either alone.

    python benchmarks/train_throughput.py --data runs/cnndm250-300x40 --configs STANDARD --amp bf16 none \\
        --steps 5 --warmup 2 --device cuda --memory-by-line 8 --tag memory_gpu
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

MIB = 2**20
#: the packages whose frames name a line (the library and the example); torch's own frames are skipped
PACKAGES = ("/scg_summarize/", "/scg/")


@dataclass(kw_only=True, slots=True)
class LineRecord:
    """The allocations of one (source line, op, dtype) over a step."""

    line: str  # "models/common/attention.py:179 flat_step"
    op: str  # "aten.bmm.default"
    dtype: str  # of the op's first tensor output
    calls: int
    mib: float


def where() -> str:
    """The innermost frame of `PACKAGES` on the calling thread's stack, as ``path:line function``
    (the path from the package's folder on)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        for package in PACKAGES:
            at = name.rfind(package)
            if at >= 0:
                return f"{name[at + 1 :]}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(autograd engine)"


class LineAllocations(TorchDispatchMode):
    """Sums, per (source line, op, output dtype), the bytes the ops of a block allocate (see the module
    docstring); ops below ``min_bytes`` are not charged (nor is their frame looked up)."""

    def __init__(self, device: torch.device, min_bytes: int = MIB) -> None:
        super().__init__()
        self.cuda = device.type == "cuda"
        self.device = device
        self.min_bytes = min_bytes
        self.lines: dict[tuple[str, str, str], list[float]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        before = torch.cuda.memory_allocated(self.device) if self.cuda else 0
        out = func(*args, **(kwargs or {}))
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if self.cuda:
            grew = torch.cuda.memory_allocated(self.device) - before
        elif func.is_view:
            grew = 0
        else:
            inputs = {
                t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
            }
            grew = sum(t.untyped_storage().nbytes() for t in outputs if t.untyped_storage().data_ptr() not in inputs)
        if grew >= self.min_bytes and grew > 0:
            dtype = str(outputs[0].dtype).removeprefix("torch.") if outputs else "-"
            total = self.lines.setdefault((where(), str(func), dtype), [0, 0.0])
            total[0] += 1
            total[1] += grew / MIB
        return out

    def top(self, n: int) -> list[LineRecord]:
        """The ``n`` lines that allocated the most, largest first."""
        records = [
            LineRecord(line=line, op=op, dtype=dtype, calls=int(calls), mib=mib)
            for (line, op, dtype), (calls, mib) in self.lines.items()
        ]
        return sorted(records, key=lambda r: -r.mib)[:n]


def to_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """A table per run that recorded ``memory_by_line`` (empty when none did)."""
    recorded = [r for r in rows if r.get("memory_by_line")]
    if not recorded:
        return []
    out = [
        "",
        "## Where a step's memory goes (`--memory-by-line`)",
        "",
        "One more step of each run under `benchmarks/step_memory.py`: the bytes each source line's ops "
        "allocated over the step (forward and backward), largest first.",
    ]
    for r in recorded:
        out += ["", f"{r['config']}, M = {r['M']}, amp {r['amp']}:", "", "| line | op | dtype | calls | MiB |"]
        out.append("|---|---|---|---:|---:|")
        out += [
            f"| `{m['line']}` | `{m['op']}` | {m['dtype']} | {m['calls']} | {m['mib']:.1f} |"
            for m in r["memory_by_line"]
        ]
    return out
