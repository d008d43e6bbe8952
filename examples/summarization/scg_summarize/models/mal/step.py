"""MAL through the step-decoder protocol (beam/greedy search, ROUGE, the CLI), and its run
directories.

:class:`MALStepDecoder` implements :class:`scg_summarize.decoding.protocol.StepDecoder`:
``init_state`` encodes the batch once (h^e, the attention keys, the mean initial state and the
constant part of eq. 17, one row per example); rows carry the two cGRU states and a row →
example index that :meth:`~MALStepDecoder.reorder` composes, so beams never copy the encoder
outputs; ``step`` is eq. (14-18) for every row. The paper decodes with beam 10
(``DecodeOptions(beam_size=10)``).

A MAL run directory (:func:`save_mal_run`) holds ``mal.pt`` (configuration and weights),
``vocab.txt`` and ``decoder.json`` naming :func:`load_mal_run` as its factory, so the
existing ``decoder.json`` loader of :mod:`scg_summarize.decoding.loading` serves it to
``scg-summarize summarize`` / ``evaluate`` unchanged.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...data.storage import VOCAB_FILE, read_meta
from .config import MALConfig
from .model import MALEncoded, MALSummarizer

__all__ = ["MAL_FACTORY", "MALState", "MALStepDecoder", "load_mal_checkpoint", "load_mal_run", "save_mal_run"]

MAL_FACTORY = "scg_summarize.models.mal.step:load_mal_run"
WEIGHTS = "mal.pt"


@dataclass
class MALState:
    """Rows of :class:`MALStepDecoder`."""

    h1: torch.Tensor  # (R, S) h^{d1}
    h2: torch.Tensor  # (R, S) h^{d2}
    example: torch.Tensor  # (R,) row -> example
    encoded: MALEncoded  # one row per example, never copied


class MALStepDecoder:
    """A :class:`~.model.MALSummarizer` seen one decoding step at a time.

    Extras: ``src_attn`` ``(R, L)``, the decoder attention a^d_t over the flat source, when
    requested through :meth:`request_extras` (not one of the conventional grid extras).
    """

    fused_topk = False

    def __init__(self, model: MALSummarizer) -> None:
        self.model = model.eval()
        self.want_attn = False

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def request_extras(self, names: Any) -> None:
        """Optional protocol hook: record ``src_attn`` only when asked."""
        names = set(names)
        self.want_attn = "*" in names or "src_attn" in names

    @torch.no_grad()
    def init_state(self, batch: Mapping[str, Any]) -> MALState:
        enc = self.model.encode_source(batch["src"], batch["src_mask"])
        example = torch.arange(enc.src.shape[0], device=enc.src.device)
        return MALState(enc.h0, enc.h0, example, enc)

    @torch.no_grad()
    def step(self, state: MALState, prev_tokens: torch.Tensor) -> tuple[torch.Tensor, MALState, dict[str, Any]]:
        model, enc, ex = self.model, state.encoded, state.example
        y = model.tgt_embedding(prev_tokens)  # (R, k_e)
        h1, h2, attn = model.decoder.step(y, state.h1, state.h2, enc.memory.rows(ex))  # eq. (14-16)
        log_probs = torch.log_softmax(model.logits(h2, enc.bias[ex]), dim=-1).float()  # eq. (17-18), (R, V)
        extras = {"src_attn": attn.float()} if self.want_attn else {}
        return log_probs, MALState(h1, h2, ex, enc), extras

    def reorder(self, state: MALState, indices: torch.Tensor) -> MALState:
        return MALState(state.h1[indices], state.h2[indices], state.example[indices], state.encoded)


def save_mal_run(
    run_dir: str | Path,
    model: MALSummarizer,
    data_dir: str | Path,
    extra: Mapping[str, Any] | None = None,
    name: str = WEIGHTS,
) -> Path:
    """Write ``model`` as a run directory usable by ``scg-summarize summarize/evaluate --run``."""
    run_dir, data_dir = Path(run_dir), Path(data_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.save({"config": model.config.to_dict(), "model": model.state_dict(), **(extra or {})}, run_dir / name)
    if not (run_dir / VOCAB_FILE).is_file():
        shutil.copyfile(data_dir / VOCAB_FILE, run_dir / VOCAB_FILE)
    spec = {
        "factory": MAL_FACTORY,
        "model": f"MAL {model.config.ablation}",
        "prep_options": read_meta(data_dir)["options"],
        "data": str(data_dir.resolve()),
        "weights": name,
    }
    (run_dir / "decoder.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return run_dir


def load_mal_checkpoint(path: str | Path, device: str = "cpu") -> MALSummarizer:
    """The model stored by :func:`save_mal_run` (``ValueError`` naming the file when it is not one)."""
    state = torch.load(path, map_location=device, weights_only=True)
    if not isinstance(state, dict) or "config" not in state or "model" not in state:
        raise ValueError(f"{path}: not a MAL checkpoint (expected 'config' and 'model')")
    config = MALConfig.from_dict(dict(state["config"]))
    content = state["model"]["content"]
    model = MALSummarizer(config, content.bool()).to(device)
    model.load_state_dict(state["model"])
    return model.eval()


def load_mal_run(
    run_dir: Path, spec: Mapping[str, Any], *, coarse_topk: int = 1, device: str = "cpu", checkpoint: str | None = None
) -> MALStepDecoder:
    """The factory named in a MAL run's ``decoder.json`` (``coarse_topk`` does not apply to MAL)."""
    weights = Path(checkpoint) if checkpoint else run_dir / str(spec.get("weights", WEIGHTS))
    return MALStepDecoder(load_mal_checkpoint(weights, device))
