"""Importing scg changes nothing in torch: torch's state before and after the first ``import scg``
(with ``scg.testing`` and ``scg.viz``) of this process, compared by ``test_core_api.py``.

``tests/conftest.py`` imports this module before it imports scg, so in a test run the first import of
scg is the one measured here, in the test process itself (no second interpreter to start: torch's import
alone costs ~2 s of CPU). Where scg was imported before this module (pytest started by a process that had
imported scg), ``BEFORE`` is None and the test runs ``check()`` in a fresh interpreter instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch.overrides import _get_current_function_mode_stack


@dataclass(kw_only=True, slots=True, frozen=True)
class TorchState:
    """What an import could change in torch: the identity of every attribute of ``torch.Tensor`` and
    of every public attribute of ``torch``, the active function modes and the distributions' default
    argument validation."""

    tensor_attributes: dict[str, int]
    torch_attributes: dict[str, int]
    function_modes: int
    validate_args: bool


def torch_state() -> TorchState:
    return TorchState(
        tensor_attributes={k: id(v) for k, v in vars(torch.Tensor).items()},
        torch_attributes={k: id(v) for k, v in vars(torch).items() if not k.startswith("_")},
        function_modes=len(_get_current_function_mode_stack()),
        validate_args=torch.distributions.Distribution._validate_args,
    )


def changes(before: TorchState, after: TorchState) -> list[str]:
    """What changed from ``before`` to ``after`` (public torch attributes added later are not changes:
    torch imports some submodules lazily)."""
    out = []
    tensor = sorted(
        k
        for k in before.tensor_attributes.keys() | after.tensor_attributes.keys()
        if before.tensor_attributes.get(k) != after.tensor_attributes.get(k)
    )
    if tensor:
        out.append(f"torch.Tensor attributes added, removed or replaced: {tensor}")
    replaced = sorted(k for k, v in before.torch_attributes.items() if after.torch_attributes.get(k) != v)
    if replaced:
        out.append(f"torch attributes removed or replaced: {replaced}")
    if after.function_modes != before.function_modes:
        out.append(f"active torch function modes: {before.function_modes} before, {after.function_modes} after")
    if after.validate_args != before.validate_args:
        out.append(f"Distribution._validate_args: {before.validate_args} before, {after.validate_args} after")
    return out


BEFORE = None if "scg" in sys.modules else torch_state()

import scg  # noqa: E402  (the import measured)
import scg.testing  # noqa: E402
import scg.viz  # noqa: E402, F401

AFTER = torch_state()


def check() -> None:
    """Fail, naming what changed, if importing scg changed torch in this process."""
    assert BEFORE is not None, "scg was imported before tests/_scg_import_purity.py: nothing to compare"
    found = changes(BEFORE, AFTER)
    assert not found, "importing scg changed torch: " + "; ".join(found)
