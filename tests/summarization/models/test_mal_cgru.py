"""MAL's GRU (eq. 1), encoder (eq. 2-6) and conditional GRU decoder (eq. 14-16) against
step-by-step references written from the equations, one example and one step at a time."""

from __future__ import annotations

import torch
from scg_summarize.models.mal.cgru import ConditionalGRU, mean_state
from scg_summarize.models.mal.encoder import BiGRUEncoder, SelfAttention
from scg_summarize.models.mal.gru import EqOneGRUCell, bigru_scan, gru_scan


def _ref_gru(cell: EqOneGRUCell, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Eq. (1) for one vector, from the cell's weight matrices."""
    H = cell.hidden
    Wx, b = cell.x_proj.weight, cell.x_proj.bias
    Wxr, Wxz, Wxh = Wx[:H], Wx[H : 2 * H], Wx[2 * H :]
    br, bz, bh = b[:H], b[H : 2 * H], b[2 * H :]
    Whr, Whz = cell.h_gates.weight[:H], cell.h_gates.weight[H:]
    Whh = cell.h_cand.weight
    r = torch.sigmoid(Wxr @ x + Whr @ h + br)
    z = torch.sigmoid(Wxz @ x + Whz @ h + bz)
    g = torch.tanh(Wxh @ x + Whh @ (r * h) + bh)
    return z * h + (1 - z) * g


def _ref_attention(dec: ConditionalGRU, q: torch.Tensor, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. (15) for one query over one document's real states ``(m, S)``."""
    e = torch.stack(
        [dec.v.weight[0] @ torch.tanh(dec.w_query.weight @ q + dec.w_key.weight @ s + dec.w_key.bias) for s in states]
    )
    a = torch.softmax(e, dim=0)
    return a, (a.unsqueeze(1) * states).sum(0)


def _model(seed: int) -> tuple[ConditionalGRU, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    E, S, A = 3, 4, 5
    dec = ConditionalGRU(E, S, A).double()
    for p in dec.parameters():
        torch.nn.init.uniform_(p, -0.8, 0.8)
    states = torch.randn(2, 6, S, dtype=torch.float64)
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    states = states * src_mask.unsqueeze(-1)
    y = torch.randn(2, 4, E, dtype=torch.float64)
    tgt_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    return dec, states, src_mask, y, tgt_mask


def test_gru_cell_is_equation_one() -> None:
    torch.manual_seed(0)
    cell = EqOneGRUCell(3, 4).double()
    x, h = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    out = cell(x, h)
    for b in range(2):
        assert torch.allclose(out[b], _ref_gru(cell, x[b], h[b]), atol=1e-12)
    # and it is not torch's GRU formulation (the reset gate is applied before W_hh)
    torch_cell = torch.nn.GRUCell(3, 4).double()
    assert not torch.allclose(torch_cell(x, h), out)


def test_bigru_encoder_against_a_step_by_step_reference() -> None:
    torch.manual_seed(1)
    enc = BiGRUEncoder(3, 4).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    out = enc(x, mask)
    for b in range(2):
        m = int(mask[b].sum())
        h = torch.zeros(4, dtype=torch.float64)
        fwd = []
        for t in range(m):
            h = _ref_gru(enc.forward_cell, x[b, t], h)
            fwd.append(h)
        h = torch.zeros(4, dtype=torch.float64)
        bwd = [torch.zeros(4, dtype=torch.float64)] * m
        for t in reversed(range(m)):
            h = _ref_gru(enc.backward_cell, x[b, t], h)
            bwd[t] = h
        ref = torch.stack([torch.cat([f, g]) for f, g in zip(fwd, bwd)])
        assert torch.allclose(out[b, :m], ref, atol=1e-12)
        assert bool((out[b, m:] == 0).all())


def test_bigru_scan_is_the_two_directions_scanned_apart() -> None:
    # padding anywhere (a gap inside a row, a row without real words); states and gradients
    torch.manual_seed(4)
    fwd, bwd = EqOneGRUCell(3, 4).double(), EqOneGRUCell(3, 4).double()
    x = torch.randn(3, 6, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    got = bigru_scan(fwd, bwd, x, mask)
    want = torch.cat([gru_scan(fwd, x, mask), gru_scan(bwd, x, mask, reverse=True)], dim=-1)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    params = [*fwd.parameters(), *bwd.parameters()]
    for a, b in zip(torch.autograd.grad(got.square().sum(), params), torch.autograd.grad(want.square().sum(), params)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_padding_never_changes_real_states() -> None:
    torch.manual_seed(2)
    cell = EqOneGRUCell(3, 4).double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    longer = torch.cat([x, torch.randn(1, 3, 3, dtype=torch.float64)], 1)  # junk in the padding
    longer_mask = torch.cat([mask, torch.zeros(1, 3, dtype=torch.bool)], 1)
    for reverse in (False, True):
        a = gru_scan(cell, x, mask, reverse=reverse)
        b = gru_scan(cell, longer, longer_mask, reverse=reverse)
        assert torch.allclose(a, b[:, :4], atol=1e-12)


def test_self_attention_against_the_equations() -> None:
    torch.manual_seed(3)
    att = SelfAttention(4, 3).double()
    h = torch.randn(1, 5, 4, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    h = h * mask.unsqueeze(-1)
    out = att(h, mask)
    m = 4
    for i in range(m):
        query = att.w_i.weight @ h[0, i] + att.w_i.bias
        e = torch.stack([att.v.weight[0] @ torch.tanh(query + att.w_j.weight @ h[0, j]) for j in range(m)])
        a = torch.softmax(e, 0)  # eq. (4)
        c = (a.unsqueeze(1) * h[0, :m]).sum(0)  # eq. (5)
        hbar = torch.tanh(att.w_h.weight @ h[0, i] + att.w_h.bias + att.w_c.weight @ c)  # eq. (6)
        assert torch.allclose(out.weights[0, i, :m], a, atol=1e-12)
        assert float(out.weights.detach()[0, i, m:].abs().sum()) == 0.0
        assert torch.allclose(out.context[0, i], c, atol=1e-12)
        assert torch.allclose(out.revised[0, i], hbar, atol=1e-12)


def test_conditional_gru_against_a_step_by_step_reference() -> None:
    dec, states, src_mask, y, tgt_mask = _model(4)
    memory = dec.memory(states, src_mask)
    h0 = mean_state(states, src_mask)
    out = dec(y, tgt_mask, memory, h0)
    for b in range(2):
        m = int(src_mask[b].sum())
        real = states[b, :m]
        h1 = h2 = real.mean(0)  # h^{d1}_0 = h^{d2}_0 = the mean encoder state
        for t in range(int(tgt_mask[b].sum())):
            h1 = _ref_gru(dec.gru1, y[b, t], h1)  # eq. (14)
            a, c = _ref_attention(dec, h1, real)  # eq. (15)
            h2 = _ref_gru(dec.gru2, torch.cat([y[b, t], c]), h2)  # eq. (16)
            assert torch.allclose(out.top[b, t], h2, atol=1e-12)
            assert torch.allclose(out.attention[b, t, :m], a, atol=1e-12)
            assert float(out.attention.detach()[b, t, m:].abs().sum()) == 0.0


def test_stepping_equals_teacher_forcing() -> None:
    dec, states, src_mask, y, tgt_mask = _model(5)
    memory = dec.memory(states, src_mask)
    h0 = mean_state(states, src_mask)
    out = dec(y, tgt_mask, memory, h0)
    example = torch.tensor([1, 0, 1])  # rows read examples through an index, repeats allowed
    rows = memory.rows(example)
    h1 = h2 = h0[example]
    for t in range(2):
        h1, h2, attn = dec.step(y[example, t], h1, h2, rows)
        assert torch.allclose(h2, out.top[example, t], atol=1e-12)
        assert torch.allclose(attn, out.attention[example, t], atol=1e-12)
