"""A deterministic, resumable batch sampler with length bucketing.

:class:`BucketBatchSampler` yields lists of example indices. With ``shuffle=True`` each epoch
it (1) permutes the examples with a generator seeded by ``(seed, epoch)``, (2) cuts the
permutation into pools of ``pool_batches * batch_size`` examples, (3) sorts each pool by
length so batches hold examples of similar length (little padding), and (4) shuffles the order
of the batches. With ``shuffle=False`` batches are consecutive indices, in order.

The sampler records how many batches of the current epoch were handed out; its
:meth:`~BucketBatchSampler.state_dict` / :meth:`~BucketBatchSampler.load_state_dict` save and
restore ``(epoch, position)``, so an interrupted run resumes exactly mid-epoch: the batches
after a restore are the ones the uninterrupted run would have produced.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

__all__ = ["BucketBatchSampler"]


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar-length examples in a seeded order, resumable mid-epoch.

    Args:
        lengths: one sort key per example (e.g. target length); only the order matters.
        batch_size: examples per batch.
        shuffle: shuffle (with bucketing) or keep the dataset order.
        seed: the base seed; epoch ``e`` uses ``numpy.random.default_rng([seed, e])``.
        pool_batches: how many batches' worth of examples are sorted together; 1 disables
            bucketing's effect, larger values give tighter length groups but less randomness.
        drop_last: drop the final incomplete batch (of each epoch).
    """

    def __init__(
        self,
        lengths: Sequence[int] | npt.NDArray[Any],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        pool_batches: int = 50,
        drop_last: bool = False,
    ) -> None:
        for name, value in (("batch_size", batch_size), ("pool_batches", pool_batches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError("lengths must be one-dimensional")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.pool_batches = pool_batches
        self.drop_last = drop_last
        self.epoch = 0
        self.position = 0  # batches of the current epoch already handed out

    @property
    def num_examples(self) -> int:
        """The number of examples sampled from."""
        return len(self.lengths)

    def __len__(self) -> int:
        """The number of batches in a full epoch."""
        n = self.num_examples
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next iteration yields (restarting it)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = 0

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """All batches of ``epoch`` (default: the current one), in order."""
        epoch = self.epoch if epoch is None else epoch
        n, size = self.num_examples, self.batch_size
        if not self.shuffle:
            order = np.arange(n)
            out = [order[i : i + size].tolist() for i in range(0, n, size)]
        else:
            rng = np.random.default_rng([self.seed, epoch])
            perm = rng.permutation(n)
            pool = size * self.pool_batches
            out = []
            for start in range(0, n, pool):
                members = perm[start : start + pool]
                members = members[np.argsort(self.lengths[members], kind="stable")]
                out.extend(members[i : i + size].tolist() for i in range(0, len(members), size))
            order_of_batches = rng.permutation(len(out))
            out = [out[i] for i in order_of_batches]
        if self.drop_last:
            out = [b for b in out if len(b) == size]
        return out

    def __iter__(self) -> Iterator[list[int]]:
        """Yield the remaining batches of the current epoch.

        After the last batch, the position resets to 0 and the epoch advances by one, so that
        plain repeated iteration also walks through successive epochs.
        """
        batches = self.batches()
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield batch
        self.position = 0
        self.epoch += 1

    def state_dict(self) -> dict[str, Any]:
        """The sampler's progress: epoch, position inside it, and its configuration."""
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "num_examples": self.num_examples,
            "shuffle": self.shuffle,
            "pool_batches": self.pool_batches,
            "drop_last": self.drop_last,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore progress saved by :meth:`state_dict`.

        Raises ``ValueError`` if the sampler was built differently (other seed, batch size,
        dataset size...), since the saved position would then point at other batches.
        """
        for key in ("seed", "batch_size", "num_examples", "shuffle", "pool_batches", "drop_last"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(
                    f"sampler state mismatch: saved {key}={state[key]!r}, this sampler has {getattr(self, key)!r}"
                )
        missing = [key for key in ("epoch", "position") if key not in state]
        if missing:
            raise ValueError(f"sampler state: missing {', '.join(missing)} (expected what state_dict() returns)")
        position = int(state["position"])
        if not 0 <= position <= len(self):
            raise ValueError(f"saved position {position} outside an epoch of {len(self)}")
        self.epoch = int(state["epoch"])
        self.position = position
