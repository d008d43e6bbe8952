"""The model-family interface (issue 14, part A): registry, row-wise state and memory, generator
logits, extended vocabulary, checkpoint round trip for every family."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from scg_summarize.data import Batch, SourceBatch
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.models.c2f.config import C2FConfig
from scg_summarize.models.c2f.model import C2FSummarizer
from scg_summarize.models.common.attention import Memory
from scg_summarize.models.common.decoder import DecoderState
from scg_summarize.models.common.extended_vocab import extend_source, extend_targets, to_corpus, to_input
from scg_summarize.models.common.rows import repeat_rows, select_rows
from scg_summarize.models.config import ModelConfig
from scg_summarize.models.loading import load_model, read_checkpoint
from scg_summarize.models.paulus.config import PaulusConfig
from scg_summarize.models.paulus.model import PaulusState, PaulusSummarizer
from scg_summarize.models.registry import FAMILIES, FamilyRegistry, build_model
from scg_summarize.train.checkpoint import save_atomic

V, VT = 40, 24


def paulus_config(**kw: object) -> PaulusConfig:
    base: dict[str, object] = dict(
        family="paulus",
        vocab_size=V,
        tgt_vocab_size=VT,
        emb_dim=8,
        hidden=12,
        enc_layers=1,
        dropout=0.0,
        emb_init_std=1.0,
        share_embeddings=True,
    )
    base.update(kw)
    return PaulusConfig(**base)  # type: ignore[arg-type]


def batch(B: int = 3, M: int = 2, N: int = 5, T: int = 6, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, M, N), generator=g)
    mask = torch.ones(B, M, N, dtype=torch.bool)
    mask[0, 1, 2:] = False
    src = src.masked_fill(~mask, 0)
    tgt = torch.randint(4, V, (B, T), generator=g)
    tgt[:, 0], tgt[:, -1] = 2, 3
    return Batch(src=src, src_mask=mask, tgt=tgt, tgt_mask=torch.ones(B, T, dtype=torch.bool))


FAMILY_CONFIGS = {
    "c2f-standard": C2FConfig(vocab_size=V, emb_dim=8, hidden=8, enc_layers=1, dec_layers=1),
    "c2f-hard": C2FConfig(
        vocab_size=V,
        attention="c2f",
        num_chunks=2,
        emb_dim=8,
        hidden=8,
        enc_layers=1,
        dec_layers=1,
        conv_filters=4,
        conv_width=2,
        copy=True,
    ),
    "paulus": paulus_config(),
    "paulus-untied": paulus_config(tie_output=False, share_embeddings=False, intra_temporal=False),
}


# ----------------------------------------------------------------------------- registry
def test_registry_builds_every_family_and_names_unknown_ones() -> None:
    assert {"c2f", "paulus"} <= set(FAMILIES.names())
    assert isinstance(build_model(FAMILY_CONFIGS["c2f-standard"]), C2FSummarizer)
    assert isinstance(build_model(FAMILY_CONFIGS["paulus"]), PaulusSummarizer)
    with pytest.raises(ValueError, match=r"model.family must be one of .*'nope'"):
        ModelConfig(vocab_size=V, family="nope")
    assert FAMILIES.config_class("paulus") is PaulusConfig
    reg = FamilyRegistry()
    reg.register("a", C2FSummarizer, config=C2FConfig)
    reg.register("a", C2FSummarizer, config=C2FConfig)  # the same entry again: a re-import
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", PaulusSummarizer, config=PaulusConfig)
    with pytest.raises(ValueError, match="config must be a ModelConfig subclass"):
        reg.register("b", C2FSummarizer, config=dict)  # type: ignore[arg-type]


def test_old_configs_without_family_are_c2f() -> None:
    config = ModelConfig.from_dict({"vocab_size": V, "attention": "hier"})
    assert isinstance(config, C2FConfig) and config.family == "c2f" and config.hierarchical


def test_each_family_has_its_own_options() -> None:
    """A key of another family is refused, naming the key, the family and the source; a family's
    configuration is its own dataclass."""
    with pytest.raises(ValueError, match=r"C2F.toml: model.tgt_vocab_size: not an option of the 'c2f' family"):
        ModelConfig.from_dict({"vocab_size": V, "tgt_vocab_size": 10}, "C2F.toml")
    with pytest.raises(ValueError, match=r"model.attention, model.multi: not an option of the 'paulus' family"):
        ModelConfig.from_dict({"family": "paulus", "attention": "c2f", "multi": 2})
    with pytest.raises(ValueError, match=r"model.family = 'paulus' takes a PaulusConfig"):
        C2FConfig(vocab_size=V, family="paulus")
    assert type(PaulusConfig.from_dict({"vocab_size": V})) is PaulusConfig  # the class's family by default


def test_a_checkpoint_with_another_familys_options_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A checkpoint whose ``[model]`` table holds options its family does not have (as older versions
    stored every family's) is refused with the file, the options and what to do; nothing is dropped."""
    config = FAMILY_CONFIGS["c2f-standard"]
    model = build_model(config)
    table = config.to_dict() | {"abs_window": 5, "tgt_vocab_size": 0}
    save_atomic({"config": {"model": table}, "model": model.state_dict()}, tmp_path / "best.pt")
    with pytest.raises(ValueError) as err:
        load_model(tmp_path / "best.pt")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'best.pt'}: cannot rebuild the model")
    assert "model.abs_window, model.tgt_vocab_size: not an option of the 'c2f' family" in message
    assert "train it again with this version" in message
    with pytest.raises(ValueError, match=r"a folder, not a checkpoint file .*load_run\(path\) loads a run"):
        load_model(tmp_path)  # (a run folder: "no such checkpoint" for a folder that exists)
    with pytest.raises(ValueError, match=r"load_model\(device='gpu'\): expected 'cpu', 'cuda' or 'cuda:N'"):
        load_model(tmp_path / "best.pt", device="gpu")  # (was blamed on the file)


@pytest.mark.parametrize("name", sorted(FAMILY_CONFIGS))
def test_checkpoint_round_trip_for_every_family(name: str, tmp_path: Path) -> None:
    """Build from the configuration, save as the trainer does, load through ``load_model``:
    same class, same parameters, same teacher-forced NLL."""
    from scg_summarize.train.config import Config

    torch.manual_seed(1)
    config = Config(model=FAMILY_CONFIGS[name])
    model = build_model(config.model).eval()
    save_atomic({"config": config.to_dict(), "model": model.state_dict()}, tmp_path / "best.pt")
    loaded, loaded_config = load_model(tmp_path / "best.pt")
    assert type(loaded) is type(model) and Config.from_dict(loaded_config).model == config.model
    b = batch()
    with torch.no_grad():
        a = model(b.src, b.src_mask, b.tgt, b.tgt_mask, mode="greedy").total_nll()
        c = loaded.eval()(b.src, b.src_mask, b.tgt, b.tgt_mask, mode="greedy").total_nll()
    assert torch.equal(a, c) and torch.isfinite(a)
    assert set(read_checkpoint(tmp_path / "best.pt")["model"]) == set(model.state_dict())


# ----------------------------------------------------------------------------- rows
@dataclass
class WithCounter(DecoderState):
    """A family's state with a field the search knows nothing about."""

    counter: torch.Tensor | None = None
    label: str = "x"


def test_a_new_state_field_survives_reorder() -> None:
    h = [torch.arange(4.0).view(4, 1)]
    state = WithCounter(
        h, [torch.zeros(4, 1)], torch.zeros(4, 1), {"sums": torch.arange(4.0) * 10}, torch.tensor([5, 6, 7, 8])
    )
    index = torch.tensor([3, 3, 0])
    out = state.select(index)
    assert type(out) is WithCounter and out.label == "x"
    assert out.counter is not None and out.counter.tolist() == [8, 8, 5]
    assert out.extra["sums"].tolist() == [30.0, 30.0, 0.0] and out.h[0].view(-1).tolist() == [3.0, 3.0, 0.0]
    rep = repeat_rows(state, 2)
    assert rep.counter is not None and rep.counter.tolist() == [5, 5, 6, 6, 7, 7, 8, 8]
    with pytest.raises(TypeError, match=r"WithCounter.label.*object"):
        select_rows(WithCounter(h, h, h[0], {}, None, object()), index)  # type: ignore[arg-type]


def test_memory_extras_survive_every_reorder_path() -> None:
    words = torch.randn(2, 1, 3, 4)
    mask = torch.ones(2, 1, 3, dtype=torch.bool)
    base = Memory.build(words, mask, None, None, {"tag": torch.tensor([[1, 1], [2, 2]])})
    assert base.index_select(torch.tensor([1, 0, 1])).extra["tag"][:, 0].tolist() == [2, 1, 2]
    assert base.repeat(2).extra["tag"][:, 0].tolist() == [1, 1, 2, 2]
    indexed = base.read_through(torch.tensor([1, 1, 0]))  # beam search's row -> example index
    assert indexed.extra["tag"] is base.extra["tag"]  # kept per example, not copied
    assert indexed.gathered().extra["tag"][:, 0].tolist() == [2, 2, 1]


def test_paulus_state_is_reordered_by_the_step_decoder() -> None:
    torch.manual_seed(0)
    model = build_model(FAMILY_CONFIGS["paulus"])
    decoder = ModelStepDecoder(model)
    b = batch()
    state = decoder.init_state(b)
    for _ in range(3):
        _, state, _ = decoder.step(state, torch.full((3,), 5))
    dec = state.dec
    assert isinstance(dec, PaulusState) and dec.past is not None and dec.temporal is not None
    assert dec.past.shape[:2] == (3, 3)
    moved = decoder.reorder(state, torch.tensor([2, 0, 0, 1]))
    assert isinstance(moved.dec, PaulusState) and moved.dec.past is not None and moved.dec.temporal is not None
    assert torch.equal(moved.dec.past, dec.past[[2, 0, 0, 1]])
    assert torch.equal(moved.dec.temporal, dec.temporal[[2, 0, 0, 1]])
    assert torch.equal(moved.memory.extra["ext_ids"], state.memory.extra["ext_ids"][[2, 0, 0, 1]])


# ----------------------------------------------------------------------------- generator
def test_generator_logits_is_the_output_layer() -> None:
    for name in ("c2f-standard", "paulus", "paulus-untied"):
        model = build_model(FAMILY_CONFIGS[name])
        weight, bias = model.generator.output_layer()
        out = torch.randn(5, weight.shape[1])
        expected = out @ weight.T + (0 if bias is None else bias)
        assert torch.allclose(model.generator.logits(out), expected, atol=1e-6)


def test_tied_output_weights_are_tied() -> None:
    """W_out = tanh(W_emb W_proj): no free output matrix, and changing W_emb changes W_out."""
    torch.manual_seed(0)
    model = build_model(FAMILY_CONFIGS["paulus"])
    gen = model.generator
    assert not any("proj.weight" in n for n, _ in model.named_parameters())
    weight, _ = gen.output_layer()
    emb = model.tgt_embedding.weight
    assert torch.allclose(weight, torch.tanh(emb[:VT] @ gen.w_proj))
    assert model.tgt_embedding is model.src_embedding  # one W_emb (share_embeddings)
    with torch.no_grad():
        emb[7] += 1.0
    assert not torch.allclose(gen.output_layer()[0][7], weight[7])
    gen.logits(torch.randn(2, weight.shape[1])).sum().backward()
    assert emb.grad is not None and emb.grad[:VT].abs().sum() > 0 and emb.grad[VT:].abs().sum() == 0
    with torch.no_grad():  # decoding's cached W_out follows parameter updates
        before = gen.output_layer()[0].clone()
        emb[5] -= 1.0
        assert not torch.equal(gen.output_layer()[0][5], before[5])
        assert torch.equal(gen.output_layer()[0], torch.tanh(emb[:VT] @ gen.w_proj))
    untied = build_model(FAMILY_CONFIGS["paulus-untied"])
    assert any(n == "generator.proj.weight" for n, _ in untied.named_parameters())


# ----------------------------------------------------------------------------- extended vocabulary
def test_extended_vocabulary_maps_oov_source_words_to_slots() -> None:
    src = torch.tensor([[[5, 30, 31, 0]], [[31, 33, 6, 0]]])
    mask = src != 0
    ext, oov = extend_source(src, mask, VT)
    assert oov.tolist() == [30, 31, 33]
    assert ext.tolist() == [[[5, VT, VT + 1, 0]], [[VT + 1, VT + 2, 6, 0]]]
    tgt = torch.tensor([[2, 30, 33, 5, 3], [2, 33, 35, 31, 3]])
    # 33 is not in example 0's source -> <unk>; 35 in no source -> <unk>
    assert extend_targets(tgt, src, mask, oov, VT).tolist() == [[2, VT, 1, 5, 3], [2, VT + 2, 1, VT + 1, 3]]
    rows = oov.unsqueeze(0).expand(2, -1)
    assert to_corpus(torch.tensor([[VT + 2, 5], [VT, 3]]), rows, VT).tolist() == [[33, 5], [30, 3]]
    assert to_input(torch.tensor([VT + 1, 35, 7]), VT).tolist() == [1, 1, 7]


def test_copy_puts_the_mass_on_the_oov_source_word_not_unk() -> None:
    """With the switch forced to copy and the attention on one out-of-vocabulary source word,
    decoding's distribution (over corpus ids) puts its mass on that word."""
    torch.manual_seed(0)
    model = build_model(FAMILY_CONFIGS["paulus"]).eval()
    with torch.no_grad():
        model.generator.switch.bias.fill_(30.0)  # p(u = 1) ~ 1: copy
    src = torch.tensor([[[33, 33, 33, 0]]])
    b = SourceBatch(src=src, src_mask=src != 0)
    decoder = ModelStepDecoder(model)
    state = decoder.init_state(b)
    log_probs, _, _ = decoder.step(state, torch.tensor([2]))
    assert log_probs.shape == (1, V)
    assert float(log_probs[0, 33].exp()) > 0.999
    assert float(log_probs[0, 1].exp()) < 1e-6  # not <unk>
    # training: the reference word 33 is its slot, and its NLL is ~0
    tgt = torch.tensor([[2, 33, 3]])
    out = model(src, src != 0, tgt, torch.ones_like(tgt, dtype=torch.bool), mode="greedy")
    assert float(out.step_nll[0][0].detach()) < 1e-3


# ----------------------------------------------------------------------------- coarse_topk
def test_coarse_topk_is_a_view_not_a_mutation() -> None:
    """Decoding with another ``coarse_topk`` reads that many chunks through a view sharing every
    parameter; the model itself keeps its ``test_k`` (decoders built from one model do not interfere)."""
    model = build_model(FAMILY_CONFIGS["c2f-hard"]).eval()
    two = ModelStepDecoder(model, coarse_topk=2)
    one = ModelStepDecoder(model)
    assert (two.coarse_topk, one.coarse_topk, model.coarse_topk) == (2, 1, 1)
    assert model.decoder.attention.test_k == 1 and two.model.decoder.attention.test_k == 2
    assert all(a is b for a, b in zip(two.model.parameters(), model.parameters(), strict=True))
    b = batch()
    memory, final = model.encode(b.src, b.src_mask)
    state = model.init_state(memory, final)
    _, _, att = two.model.advance(state, b.tgt[:, 0], memory, 0, "greedy")
    assert att.selected is not None and att.selected.shape == (3, 2)
    _, _, att = model.advance(state, b.tgt[:, 0], memory, 0, "greedy")
    assert att.selected is not None and att.selected.shape == (3, 1)
    paulus = build_model(FAMILY_CONFIGS["paulus"])
    assert paulus.with_coarse_topk(1) is paulus and paulus.coarse_topk == 1
    with pytest.raises(ValueError, match=r"coarse_topk = 3: this PaulusSummarizer chooses no chunks"):
        paulus.with_coarse_topk(3)  # (it was ignored)


def test_switching_the_family_of_a_configuration_names_the_options_it_would_drop() -> None:
    """issue 28 item 8: ``--set model.family=abs`` on a C2F configuration is refused, naming the C2F
    options, the family and the configuration, instead of silently ignoring them."""
    from scg_summarize.train.config_loading import load_config
    from scg_summarize.train.schema import ConfigError

    with pytest.raises(ConfigError) as err:
        load_config("C2F", ["model.family=abs"])
    text = str(err.value)
    assert "configuration 'C2F'" in text and "not an option of the 'abs' family" in text
    assert "model.attention" in text and "model.chunk_encoder" in text
    assert type(load_config("tiny-ABS").model).__name__ == "AbsFamilyConfig"  # the overlay's C2F sizes left out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"input_feed": "false"}, r"model.input_feed must be true or false, got 'false'"),  # (was taken as true)
        ({"bidirectional": "no"}, r"model.bidirectional must be true or false"),
        ({"emb_init_std": float("inf")}, r"model.emb_init_std must be a finite number"),
        ({"emb_init_std": -1.0}, r"model.emb_init_std must be >= 0"),
        ({"num_chunks": -1}, r"model.num_chunks must be >= 0"),
        ({"init_range": -1.0}, r"model.init_range must be > 0"),
        ({"vocab_size": "50"}, r"model.vocab_size must be an integer, got '50'"),
        ({"test_k": 3}, r"model.test_k > 1 \(chunks read per step\) needs model.attention = 'c2f'"),
    ],
)
def test_a_config_built_in_python_is_checked_like_a_toml_table(options: dict[str, object], message: str) -> None:
    """The dataclasses took what `load_config` refuses: ``input_feed="false"`` built the input
    feeding, an infinite embedding scale gave non-finite embeddings, ``test_k`` of a soft
    attention was reported but ignored."""
    with pytest.raises(ValueError, match=message):
        C2FConfig(**{"vocab_size": V, **options})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"build_model\(config\): expected a ModelConfig"):
        build_model({"family": "c2f"})  # type: ignore[arg-type]


#: one tiny model of each family (ABS and MAL built from their own tables)
EVERY_FAMILY = {
    **FAMILY_CONFIGS,
    "abs": ModelConfig.from_dict({"family": "abs", "vocab_size": V, "emb_dim": 6, "hidden": 8, "abs_context": 3}),
    "mal": ModelConfig.from_dict({"family": "mal", "vocab_size": V, "emb_dim": 8, "hidden": 6}),
}


@pytest.mark.parametrize("name", sorted(EVERY_FAMILY))
def test_every_familys_forward_encode_and_step_name_tensors_they_cannot_use(name: str) -> None:
    """Float or int32 ids, an int mask, a rank-2 source, a target batch of another size, an empty
    batch and a target of <s> alone failed deep inside torch (``Expected tensor for argument #1
    'indices' to have one of the following scalar types``, ``Sizes of tensors must match``,
    ``max(): Expected reduction dim``, ``stack expects a non-empty TensorList``), or were accepted by
    some families (int32 ids, a long tgt_mask); one check of the family base class names them."""
    torch.manual_seed(0)
    model = build_model(EVERY_FAMILY[name]).eval()
    family = type(model).__name__
    src, src_mask, tgt, tgt_mask = batch().src, batch().src_mask, batch().tgt, batch().tgt_mask
    forward = f"{family}.forward"
    cases: list[tuple[tuple[torch.Tensor, ...], type[Exception], str]] = [
        (
            (src.float(), src_mask, tgt, tgt_mask),
            TypeError,
            r"\(src\): expected int64 \(long\) word ids \(B, M, N\), "
            r"got a tensor of dtype float32 and shape \(3, 2, 5\)",
        ),
        ((src, src_mask, tgt.int(), tgt_mask), TypeError, r"\(tgt\): expected int64 \(long\) word ids \(B, T\)"),
        (
            (src, src_mask.long(), tgt, tgt_mask),
            TypeError,
            r"\(src_mask\): expected a bool tensor, got a tensor of "
            r"dtype int64",
        ),
        ((src, src_mask, tgt, tgt_mask.long()), TypeError, r"\(tgt_mask\): expected a bool tensor"),
        (
            (src[:, 0], src_mask[:, 0], tgt, tgt_mask),
            ValueError,
            r"\(src\): expected word ids \(B, M, N\) with no "
            r"size 0, got a tensor of dtype int64 and shape \(3, 5\)",
        ),
        ((src, src_mask[:, :1], tgt, tgt_mask), ValueError, r"\(src_mask\): expected the shape \(3, 2, 5\) of src"),
        ((src, src_mask, tgt[:2], tgt_mask[:2]), ValueError, r"\(tgt\): expected src's 3 examples on cpu, got 2"),
        ((src[:0], src_mask[:0], tgt[:0], tgt_mask[:0]), ValueError, r"\(src\): .* with no size 0, got .* \(0, 2, 5\)"),
        ((src, src_mask, tgt[:, :1], tgt_mask[:, :1]), ValueError, r"\(tgt\): expected T >= 2 positions .* got 1"),
        ((src, src_mask, tgt, tgt_mask[:, :-1]), ValueError, r"\(tgt_mask\): expected the shape \(3, 6\) of tgt"),
    ]
    for args, error, message in cases:
        for task in ("teacher", "rollout"):
            with pytest.raises(error, match=re.escape(forward) + message):
                model(*args, mode="soft", task=task, max_len=2)
    with pytest.raises(TypeError, match=rf"{family}.encode\(src\): expected int64 \(long\) word ids"):
        model.encode(src.float(), src_mask)
    with pytest.raises(ValueError, match=rf"{family}.encode\(src\): .* no size 0, got .* \(3, 2, 0\)"):
        model.encode(src[:, :, :0], src_mask[:, :, :0])
    memory, final = model.encode(src, src_mask)
    state = model.init_state(memory, final)
    step = rf"{family}.step\(prev_tokens\): expected int64 \(long\) word ids \(3,\), one per row of the state, got "
    with pytest.raises(TypeError, match=step + r"a tensor of dtype float32 and shape \(3,\)"):
        model.step(state, torch.full((3,), 2.0), memory, 0, "soft")
    with pytest.raises(ValueError, match=step + r"a tensor of dtype int64 and shape \(3, 1\)"):
        model.step(state, torch.full((3, 1), 2), memory, 0, "soft")
    with pytest.raises(ValueError, match=step + r"a tensor of dtype int64 and shape \(2,\)"):
        model.step(state, torch.full((2,), 2), memory, 0, "soft")
    assert model.step(state, torch.full((3,), 2), memory, 0, "soft")[0].shape[0] == 3
    assert torch.isfinite(model(src, src_mask, tgt, tgt_mask, mode="soft").total_nll())


@pytest.mark.parametrize("name", sorted(EVERY_FAMILY))
def test_every_familys_advance_names_the_words_and_state_it_cannot_use(name: str) -> None:
    """``advance`` (the decoder step that `ModelStepDecoder` and teacher forcing call, without
    `step`'s check) given float words, words of another row count or no `DecoderState` failed deep
    inside torch (``Expected tensor for argument #1 'indices'``, ``Sizes of tensors must match``,
    ``Input batch size 2 doesn't match hidden0 batch size 3``, ``'tuple' object has no attribute``);
    the family base class wraps every family's own ``advance`` as it wraps ``encode``."""
    torch.manual_seed(0)
    model = build_model(EVERY_FAMILY[name]).eval()
    family = type(model).__name__
    b = batch()
    memory, final = model.encode(b.src, b.src_mask)
    state = model.init_state(memory, final)
    advance = (
        rf"{family}.advance\(prev_tokens\): expected int64 \(long\) word ids \(3,\), one per row of the state, got "
    )
    with pytest.raises(TypeError, match=advance + r"a tensor of dtype float32 and shape \(3,\)"):
        model.advance(state, torch.full((3,), 2.0), memory, 0, "soft")
    with pytest.raises(TypeError, match=advance + r"list"):
        model.advance(state, [2, 2, 2], memory, 0, "soft")
    with pytest.raises(ValueError, match=advance + r"a tensor of dtype int64 and shape \(2,\)"):
        model.advance(state, torch.full((2,), 2), memory, 0, "soft")
    with pytest.raises(ValueError, match=advance + r"a tensor of dtype int64 and shape \(3, 1\)"):
        model.advance(state, prev_tokens=torch.full((3, 1), 2), memory=memory, t=0, mode="soft")
    for call in ("advance", "step"):
        with pytest.raises(TypeError, match=rf"{family}.{call}\(state\): expected a DecoderState .* got tuple"):
            getattr(model, call)((state.h, state.c), torch.full((3,), 2), memory, 0, "soft")
    out, new_state, _ = model.advance(state, torch.full((3,), 2), memory, 0, "soft")
    assert out.shape[0] == 3 and isinstance(new_state, DecoderState)
    assert getattr(type(model).advance, "checks_inputs", False)


@pytest.mark.parametrize("name", sorted(EVERY_FAMILY))
def test_every_family_refuses_inputs_on_another_device_than_its_own(name: str) -> None:
    """Ids on another device than the model's parameters failed inside torch (``Tensor on device
    meta is not on the expected device cpu!``, ``Tensor.item() cannot be called on meta tensors``;
    on a GPU, CPU ids given to a CUDA model: ``Expected all tensors to be on the same device``) or,
    given to ``step``, were taken (every family returned meta log-probabilities). ``meta`` is the
    second device every machine has: the model on the CPU with the ids on ``meta``, and the other
    way round."""
    torch.manual_seed(0)
    model = build_model(EVERY_FAMILY[name]).eval()
    family = type(model).__name__
    b = batch()
    meta = [x.to("meta") for x in (b.src, b.src_mask, b.tgt, b.tgt_mask)]
    on = r"\(src\): expected a tensor on the model's device, cpu, got one on meta \(move the inputs with .to\('cpu'\)\)"
    for task in ("teacher", "rollout"):
        with pytest.raises(ValueError, match=rf"{family}.forward" + on):
            model(*meta, mode="soft", task=task, max_len=2)
    with pytest.raises(ValueError, match=rf"{family}.encode" + on):
        model.encode(meta[0], meta[1])
    memory, final = model.encode(b.src, b.src_mask)
    state = model.init_state(memory, final)
    for call in ("step", "advance"):
        with pytest.raises(
            ValueError,
            match=rf"{family}.{call}\(prev_tokens\): expected word ids on the device of the state and the model, "
            r"cpu, got them on meta",
        ):
            getattr(model, call)(state, torch.full((3,), 2, device="meta"), memory, 0, "soft")
    model.to("meta")
    with pytest.raises(
        ValueError, match=rf"{family}.encode\(src\): expected a tensor on the model's device, meta, got one on cpu"
    ):
        model.encode(b.src, b.src_mask)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_model_given_cpu_ids_names_both_devices() -> None:
    """The case a user meets: a model on the GPU, the batch left on the CPU."""
    model = build_model(EVERY_FAMILY["c2f-standard"]).eval().to("cuda")
    b = batch()
    with pytest.raises(
        ValueError,
        match=r"C2FSummarizer.forward\(src\): expected a tensor on the model's device, cuda:0, got one on cpu",
    ):
        model(b.src, b.src_mask, b.tgt, b.tgt_mask)
    memory, final = model.encode(b.src.cuda(), b.src_mask.cuda())
    with pytest.raises(ValueError, match=r"C2FSummarizer.step\(prev_tokens\): .* cuda:0, got them on cpu"):
        model.step(model.init_state(memory, final), torch.full((3,), 2), memory, 0, "soft")
