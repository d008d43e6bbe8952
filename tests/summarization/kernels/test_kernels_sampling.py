"""The coarse sampler: Philox, the distribution of the draws (chi-square), determinism, and the same
draws from the reference and the Triton kernel (the latter on Triton's interpreter without a GPU)."""

from __future__ import annotations

import importlib.util
import itertools
import math

import pytest
import torch

from ..kernel_support import DEVICE, backend, builtins_scanned_once, chi_square_pvalue, one_thread  # noqa: F401

from scg_summarize.kernels import c2f_coarse_sample, draw_log_prob  # isort: skip
from scg_summarize.kernels.philox import gumbel, philox_uint32, uniform  # isort: skip

HAS_TRITON = importlib.util.find_spec("triton") is not None
ALPHA = 1e-3  # significance level of the seeded goodness-of-fit tests

pytestmark = pytest.mark.usefixtures("one_thread", "builtins_scanned_once")

#: One document with 6 chunks (chunk 4 padded, its score would dominate); probabilities 0.10 to 0.37.
LOGITS = torch.tensor([0.3, -0.5, 0.8, 0.0, 5.0, -0.2], dtype=torch.float64)
MASK = torch.tensor([True, True, True, True, False, True])


def draws(n_rows: int, k: int, mode: str, seed: int, which: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` draws for each of ``n_rows`` query rows that all read the one document: the chunk
    scores are ``LOGITS`` (keys = identity rows, query = logits)."""
    m = LOGITS.numel()
    keys = torch.eye(m, dtype=torch.float32, device=DEVICE).unsqueeze(0)
    query = LOGITS.to(torch.float32, copy=True).to(DEVICE).expand(n_rows, m).contiguous()
    rows = torch.zeros(n_rows, dtype=torch.int64, device=DEVICE)
    with backend(which):
        log_alpha, idx = c2f_coarse_sample(
            keys, query, MASK.unsqueeze(0).to(DEVICE), torch.tensor([seed], device=DEVICE), k, mode, rows
        )
    return log_alpha.cpu(), idx.cpu()


def softmax_probs() -> torch.Tensor:
    return torch.softmax(LOGITS.masked_fill(~MASK, float("-inf")), 0)


def test_philox_known_answers() -> None:
    # First output word of Philox4x32-10 for counters (i, 0, 0, 0), as produced by Triton's tl.randint.
    assert philox_uint32(0, torch.arange(4)).tolist() == [1713891541, 4175744164, 83534633, 3381718825]
    assert philox_uint32(2**40 + 7, torch.tensor([0, 1000])).tolist() == [871882489, 225251111]
    u = uniform(torch.tensor([0]), torch.arange(2))
    assert u.dtype == torch.float32 and u.tolist() == [0.7980929017066956, 0.055517591536045074]


def test_philox_uniform_and_gumbel_moments() -> None:
    n = 200_000
    u = uniform(12345, torch.arange(n)).double()
    assert 0.0 <= float(u.min()) and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / n)
    g = gumbel(7, torch.arange(n), dtype=torch.float64)
    euler_gamma = 0.5772156649015329
    assert abs(float(g.mean()) - euler_gamma) < 5 * math.sqrt(math.pi**2 / 6 / n)
    assert not torch.equal(uniform(1, torch.arange(64)), uniform(2, torch.arange(64)))


@pytest.mark.parametrize(
    "which",
    [
        "reference",
        # slow (~2 s of CPU in the interpreter): Triton's draws are the reference's bit for bit, 32 draws
        # a row included (test_reference_and_triton_draw_the_same_chunks), so the reference's test covers them
        pytest.param("triton", marks=[pytest.mark.skipif(not HAS_TRITON, reason="no triton"), pytest.mark.slow]),
    ],
)
def test_multinomial_draws_follow_the_softmax(which: str) -> None:
    # 32 draws per row (one interpreter program draws them all), 1600 draws on Triton's interpreter
    n_rows = 250 if which == "reference" else 50
    log_alpha, idx = draws(n_rows, 32, "multinomial", seed=2024, which=which)
    probs = softmax_probs()
    assert torch.allclose(log_alpha[0].exp().double(), probs, atol=1e-6)
    counts = torch.bincount(idx.flatten(), minlength=6)
    assert counts[4] == 0  # the padded chunk is never drawn
    assert chi_square_pvalue(counts, probs) > ALPHA
    # draws within a row are independent: consecutive pairs (draw 2i, draw 2i+1) follow alpha x alpha
    pairs = torch.bincount((idx[:, 0::2] * 6 + idx[:, 1::2]).flatten(), minlength=36)
    assert chi_square_pvalue(pairs, torch.outer(probs, probs)) > ALPHA


def test_chi_square_test_catches_a_wrong_distribution() -> None:
    # The same draws tested against nearby wrong laws: a tempered softmax and two swapped chunks.
    _, idx = draws(250, 32, "multinomial", seed=2024, which="reference")
    counts = torch.bincount(idx.flatten(), minlength=6)
    probs = softmax_probs()
    tempered = torch.softmax(0.8 * LOGITS.masked_fill(~MASK, float("-inf")), 0)
    swapped = probs[[0, 1, 2, 5, 4, 3]]
    assert chi_square_pvalue(counts, probs) > ALPHA
    assert chi_square_pvalue(counts, tempered) < 1e-6
    assert chi_square_pvalue(counts, swapped) < 1e-6
    # and a sampler that ignores the mask would be caught outright
    assert chi_square_pvalue(counts + torch.tensor([0, 0, 0, 0, 1, 0]), probs) == 0.0


def test_distinct_draws_follow_plackett_luce() -> None:
    # Reference only: Triton's draws are the reference's, bit for bit (test below), and one pair per
    # program would be slow in the interpreter.
    _, idx = draws(4000, 2, "distinct", seed=99, which="reference")
    assert bool((idx[:, 0] != idx[:, 1]).all())
    p = softmax_probs()
    joint = torch.zeros(6, 6, dtype=torch.float64)
    for i, j in itertools.permutations(range(6), 2):
        joint[i, j] = p[i] * p[j] / (1 - p[i]) if p[i] < 1 else 0.0
    pairs = torch.bincount(idx[:, 0] * 6 + idx[:, 1], minlength=36)
    assert chi_square_pvalue(pairs, joint) > ALPHA


def test_distinct_log_prob_is_a_distribution() -> None:
    # Plackett-Luce probabilities of all ordered 3-tuples of distinct chunks sum to one.
    log_alpha = torch.log_softmax(torch.tensor([[0.2, -1.0, 0.7, 1.5, 0.0]], dtype=torch.float64), -1)
    tuples = torch.tensor(list(itertools.permutations(range(5), 3)))
    lp = draw_log_prob(log_alpha.expand(len(tuples), 5), tuples, "distinct")
    assert abs(float(lp.exp().sum()) - 1.0) < 1e-12
    # with replacement: all 5**2 ordered pairs
    pairs = torch.tensor(list(itertools.product(range(5), repeat=2)))
    assert abs(float(draw_log_prob(log_alpha.expand(25, 5), pairs).exp().sum()) - 1.0) < 1e-12


@pytest.mark.parametrize(
    "which",
    [
        "reference",
        # slow (~0.7 s of CPU in the interpreter): Triton's draws for a seed are the reference's bit for bit
        # (test_reference_and_triton_draw_the_same_chunks), whose determinism and seed dependence are tested here
        pytest.param("triton", marks=[pytest.mark.skipif(not HAS_TRITON, reason="no triton"), pytest.mark.slow]),
    ],
)
def test_draws_are_deterministic_under_a_seed(which: str) -> None:
    # two rows of 8 draws (Triton's interpreter runs a program per row)
    first = draws(2, 8, "multinomial", seed=5, which=which)[1]
    again = draws(2, 8, "multinomial", seed=5, which=which)[1]
    other = draws(2, 8, "multinomial", seed=6, which=which)[1]
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


@pytest.mark.skipif(not HAS_TRITON, reason="triton not installed")
@pytest.mark.parametrize(
    ("mode", "rows", "k"),
    # 2 rows (the interpreter runs a program per row; the second row draws from its own Philox offsets);
    # k = 3 (a masked lane of K_PAD = 4); 32: the chi-square's k. (Multinomial draws with k = 3, and with a
    # row map: test_kernels_triton.py::test_coarse_forward_and_backward, shapes 1 and 2, compare them.)
    [("distinct", 2, 3), ("greedy", 2, 3), ("multinomial", 2, 32)],
)
def test_reference_and_triton_draw_the_same_chunks(mode: str, rows: int, k: int) -> None:
    ref = draws(rows, k, mode, seed=31337, which="reference")
    tri = draws(rows, k, mode, seed=31337, which="triton")
    assert torch.equal(ref[1], tri[1])
    assert torch.allclose(ref[0], tri[0], atol=1e-6)


def test_greedy_takes_the_top_chunks() -> None:
    log_alpha, idx = draws(3, 3, "greedy", seed=0, which="reference")
    assert idx.tolist() == [[2, 0, 3]] * 3
    assert torch.equal(draw_log_prob(log_alpha, idx, "greedy"), torch.zeros(3, dtype=log_alpha.dtype))
