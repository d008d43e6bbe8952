"""docs/add-a-family.md, run as written: its ``plain`` family is configured from a ``[model]``
table, trained by teacher forcing, rolled out as scg word nodes, decoded by beam search through
the one step decoder and rebuilt from a checkpoint."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from scg_summarize.decode_options import DecodeOptions
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.decoding.beam import beam_search
from scg_summarize.models import FAMILIES, ModelConfig, SummarizerFamily, build_model
from scg_summarize.models.loading import load_model
from scg_summarize.train.checkpoint import save_atomic
from scg_summarize.train.config import Config
from scg_summarize.train.config_loading import load_config

import scg

from ..models_helpers import V, make_batch

PAGE = Path(__file__).resolve().parents[3] / "docs" / "add-a-family.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture(scope="module")
def page() -> dict[str, Any]:
    """The page's Python blocks, executed once in order (registering ``plain`` twice would be refused)."""
    namespace: dict[str, Any] = {}
    if "plain" not in FAMILIES:
        exec(compile("".join(_blocks("python")), str(PAGE), "exec"), namespace)
    return namespace


def _plain(**options: Any) -> SummarizerFamily[Any, Any]:
    torch.manual_seed(0)
    return build_model(
        ModelConfig.from_dict({"family": "plain", "vocab_size": V, "emb_dim": 8, "hidden": 8, **options})
    )


def _tensors(B: int = 3, M: int = 2, N: int = 5, T: int = 6) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (B, M, N), generator=g)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    mask[0, 1, 2:] = False
    tgt = torch.randint(4, V, (B, T), generator=g)
    tgt[:, 0], tgt[:, -1] = 2, 3
    return src.masked_fill(~mask, 0), mask, tgt, torch.ones(B, T, dtype=torch.bool)


def test_the_page_registers_a_family_with_its_own_configuration(page: dict[str, Any]) -> None:
    config = ModelConfig.from_dict({"family": "plain", "vocab_size": V, "enc_layers": 2})
    assert type(config).__name__ == "PlainConfig" and config.enc_layers == 2  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"model.attention: not an option of the 'plain' family"):
        ModelConfig.from_dict({"family": "plain", "attention": "c2f"})
    assert isinstance(_plain(), SummarizerFamily)


def test_the_pages_configuration_file_loads(page: dict[str, Any], tmp_path: Path) -> None:
    toml = next(block for block in _blocks("toml") if 'family = "plain"' in block)
    (tmp_path / "plain.toml").write_text(toml, encoding="utf-8")
    config = load_config(str(tmp_path / "plain.toml"))
    assert config.model.family == "plain" and config.model.hidden == 128


def test_the_page_family_trains_rolls_out_and_decodes(page: dict[str, Any]) -> None:
    model = _plain()
    src, src_mask, tgt, tgt_mask = _tensors()
    out = model(src, src_mask, tgt, tgt_mask)
    out.total_nll().backward()
    assert torch.isfinite(out.total_nll()) and model.cell.weight_ih.grad is not None
    assert not model.hard and not model.copies and model.markov_window is None  # the defaults
    with scg.Graph() as g:
        rolled = model(src, src_mask, tgt, tgt_mask, task="rollout", max_len=4)
    assert {n.name for n in g.stochastic_nodes} == {"token"} and rolled.tokens.shape[0] == 3
    found = beam_search(ModelStepDecoder(model), make_batch(), DecodeOptions(beam_size=2, max_len=5))
    assert len(found) == 3 and all(len(h) == 1 for h in found)


def test_the_page_family_round_trips_through_a_checkpoint(page: dict[str, Any], tmp_path: Path) -> None:
    model = _plain().eval()
    config = Config(model=model.config)
    save_atomic({"config": config.to_dict(), "model": model.state_dict()}, tmp_path / "best.pt")
    loaded, _ = load_model(tmp_path / "best.pt")
    src, src_mask, tgt, tgt_mask = _tensors()
    with torch.no_grad():
        assert torch.equal(
            model(src, src_mask, tgt, tgt_mask).total_nll(), loaded(src, src_mask, tgt, tgt_mask).total_nll()
        )


def test_the_page_family_checks_its_input_without_writing_a_check(page: dict[str, Any]) -> None:
    """The family base class wraps a family's own ``encode`` (and checks ``forward`` and ``step``):
    the page's ``Plain`` names float ids without a line of its own (it failed in its embedding)."""
    model = _plain()
    src, src_mask, tgt, tgt_mask = _tensors()
    with pytest.raises(TypeError, match=r"Plain.encode\(src\): expected int64 \(long\) word ids \(B, M, N\)"):
        model.encode(src.float(), src_mask)
    with pytest.raises(ValueError, match=r"Plain.forward\(tgt\): expected src's 3 examples on cpu, got 1"):
        model(src, src_mask, tgt[:1], tgt_mask[:1])
