"""One SGD step of the trainer under torchrun (run by test_robust_ddp.py, not collected by pytest).

Usage: torchrun --nproc_per_node 2 ddp_step_worker.py CORPUS BATCH.pt OUT_DIR

For each ``normalize`` mode, and for each of ``exact`` (the trainer as it is) and ``per-rank``
(each rank divides by its own token count: the defect the test must catch), rank 0 writes the
parameters after one step on the global batch in ``BATCH.pt`` to ``OUT_DIR/MODE-VARIANT.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from robust_support import STEP_OVERRIDES  # (this script's folder is on sys.path)
from scg_summarize.train import Trainer, load_config


def main() -> None:
    corpus, batch_file, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    batch = torch.load(batch_file, weights_only=False)
    for mode in ("batch", "tokens"):
        for variant in ("exact", "per-rank"):
            config = load_config("tiny-STANDARD", [*STEP_OVERRIDES, f"train.normalize='{mode}'"])
            trainer = Trainer(config, corpus, out / f"run-{mode}-{variant}", quiet=True, log=lambda line: None)
            if variant == "per-rank":  # the old normalizer: this rank's own token count
                world = trainer.dist.world
                trainer.dist.all_reduce = lambda values, device, w=world: [v * w for v in values]  # type: ignore
            trainer.train_step(batch)
            if trainer.dist.is_main:
                torch.save(trainer.model.state_dict(), out / f"{mode}-{variant}.pt")
            trainer.dist.barrier()
            trainer.close()


if __name__ == "__main__":
    main()
