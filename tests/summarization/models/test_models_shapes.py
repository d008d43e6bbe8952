"""Every model and Table 1 option: output shapes and attention statistics.

(Decoding these models is tested with the shared decoder in ``test_decoding_adapter.py``.)
"""

from __future__ import annotations

import pytest
import torch

import scg

from ..models_helpers import make_batch, make_model

OPTIONS = [
    ("standard", {}),
    ("model1", {}),
    ("hier", {"chunk_encoder": "conv"}),
    ("hier", {"chunk_encoder": "bow"}),
    ("hier", {"pos": True}),
    ("c2f", {}),
    ("c2f", {"pos": True}),
    ("c2f", {"multi": 2}),
    ("c2f", {"pos": True, "multi": 2}),
    ("c2f", {"multi": 3, "chunk_encoder": "bow"}),
    ("c2f", {"test_k": 2}),
    ("standard", {"bidirectional": True}),
    ("c2f", {"bidirectional": True, "multi": 2}),
]


@pytest.mark.parametrize(("attention", "options"), OPTIONS)
def test_teacher_forcing_shapes(attention: str, options: dict) -> None:
    batch = make_batch(B=3, M=4, N=6, T=5)
    model = make_model(attention, **options)
    modes = ["greedy", "soft"] if attention == "c2f" else ["greedy"]
    for mode in modes:
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode=mode)
        assert len(out.step_nll) == 4 and all(n.shape == (3,) for n in out.step_nll)
        assert out.step_mask.shape == (3, 4)
        assert out.tokens() == int(batch.tgt_mask[:, 1:].sum())
        for t, nll in enumerate(out.step_nll):
            assert torch.all(nll[~out.step_mask[:, t]] == 0)  # padding positions cost nothing
            assert torch.all(nll[out.step_mask[:, t]] > 0)
        for att in out.attention:
            assert att.context.shape == (3, 12)
            assert att.chunk_probs.shape == (3, 4) and att.chunk_weights.shape == (3, 4)
            torch.testing.assert_close(att.chunk_probs.sum(1), torch.ones(3))
            torch.testing.assert_close(att.chunk_weights.sum(1), torch.ones(3))
            assert torch.all(att.chunk_probs[0, -1] == 0)  # the empty chunk gets no attention
            total = batch.src_mask.sum((1, 2)).float()
            if attention == "c2f" and mode != "soft":
                assert att.selected is not None and att.selected.shape == (3, min(model.config.test_k, 4))
                assert torch.all(att.words_read <= total)
            else:
                torch.testing.assert_close(att.words_read, total)


@pytest.mark.parametrize("multi", [1, 2])
def test_c2f_sample_mode_draws_k_chunks_per_step(multi: int) -> None:
    batch = make_batch()
    model = make_model("c2f", multi=multi)
    with scg.Graph() as g:
        out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="sample")
    nodes = g.stochastic_nodes
    assert len(nodes) == len(out.step_nll)
    for t, (node, att) in enumerate(zip(nodes, out.attention)):
        assert (node.name, node.step) == ("coarse", t)
        assert node.value.shape == (3, multi)
        assert torch.equal(att.selected, node.value)
        torch.testing.assert_close(att.chunk_weights.sum(1), torch.ones(3))
        assert not torch.any(node.value[0] == 3)  # never the empty chunk


def test_sample_mode_needs_a_graph_only_for_c2f() -> None:
    batch = make_batch()
    make_model("hier")(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="sample")
    with pytest.raises(scg.SCGError, match="outside a graph"):
        make_model("c2f")(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="sample")


def test_hier_and_c2f_share_parameters_for_pretraining() -> None:
    hier, c2f = make_model("hier"), make_model("c2f", multi=2)
    assert hier.state_dict().keys() == c2f.state_dict().keys()
    c2f.load_state_dict(hier.state_dict())
    batch = make_batch()
    soft_hier = hier(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask).total_nll()
    soft_c2f = c2f.eval()(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, mode="soft").total_nll()
    hier.eval()
    torch.testing.assert_close(hier(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask).total_nll(), soft_c2f)
    assert soft_hier.requires_grad


def test_initialization_is_uniform_and_padding_embeddings_zero() -> None:
    model = make_model("hier", chunk_encoder="bow")
    for name, p in model.named_parameters():
        assert p.abs().max() <= 0.1 + 1e-7, name
    assert torch.all(model.src_embedding.weight[0] == 0) and torch.all(model.tgt_embedding.weight[0] == 0)
    bow = model.chunk_encoder.embedding.weight
    assert not bow.requires_grad and torch.all(bow[0] == 0) and bow[1:].abs().sum() > 0
    assert {id(p) for p in model.chunk_encoder_parameters()} == set()  # BOW: nothing to train


def test_share_embeddings() -> None:
    model = make_model("standard", share_embeddings=True)
    assert model.src_embedding is model.tgt_embedding
