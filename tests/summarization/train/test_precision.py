"""``train.precision`` (`scg_summarize.train.precision`): bf16 autocast of the training objective,
the rest of the step in fp32."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.train import Trainer, load_config
from torch.utils._python_dispatch import TorchDispatchMode


class _MatmulDtypes(TorchDispatchMode):
    """The dtypes of the matrix products run inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket.__name__ in ("mm", "addmm", "bmm"):
            self.dtypes.add(args[-1].dtype)
        return func(*args, **(kwargs or {}))


def test_an_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match=r"train.precision.*'fp32', 'bf16'"):
        load_config("tiny-C2F", ["train.precision='fp16'"])


SMALL = ["model.emb_dim=8", "model.hidden=8"]


@pytest.mark.parametrize(
    ("name", "sizes"),
    [("tiny-C2F", []), ("tiny-STANDARD", []), ("MAL", SMALL), ("PAULUS-ML", SMALL), ("ABS", SMALL)],
)
def test_bf16_runs_the_objective_s_products_in_bf16_and_keeps_the_parameters_fp32(
    synthetic_corpus: Path, tmp_path: Path, name: str, sizes: list[str]
) -> None:
    """Every family (MAL's GRU scan and closed-form PageRank were a dtype error under autocast: the
    carried state stays float32, the linear solve runs in float32)."""
    options = [*sizes, "train.epochs=1", "train.max_steps_per_epoch=1"]
    seen = {}
    for precision in ("fp32", "bf16"):
        config = load_config(name, [*options, f"train.precision='{precision}'"])
        trainer = Trainer(config, synthetic_corpus, tmp_path / precision, quiet=True, log=lambda line: None)
        try:
            batch = next(iter(trainer.loader))
            with _MatmulDtypes() as mode:
                values = trainer.train_step(batch)
            assert math.isfinite(values.loss)
            clips = config.train.max_grad_norm > 0  # (ABS renormalizes after each epoch instead)
            assert (values.norm is not None and math.isfinite(values.norm)) if clips else values.norm is None
            assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
            assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trainer.model.parameters())
            seen[precision] = mode.dtypes, values.nll
        finally:
            trainer.close()
    assert seen["fp32"][0] == {torch.float32}
    assert torch.bfloat16 in seen["bf16"][0]
    # the same model and batch: bf16's NLL is fp32's to bf16's precision (8 bits of mantissa)
    assert seen["bf16"][1] != seen["fp32"][1] and math.isclose(seen["bf16"][1], seen["fp32"][1], rel_tol=0.05)
