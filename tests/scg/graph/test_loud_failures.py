"""Issue 24 item 8 (tracker parts): programs scg cannot follow fail loudly, naming the node or
the line, instead of silently losing influence or failing deep inside torch."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.distributions as D
from torch.distributions import Categorical, Normal

import scg

THETA = torch.tensor([0.2, -0.1, 0.3], requires_grad=True)


def test_jacrev_of_a_function_of_a_captured_sample_warns() -> None:
    with scg.Graph() as g, pytest.warns(scg.InfluenceLostWarning, match=r"'z'.*torch.func"):
        z = scg.sample(Categorical(logits=THETA), name="z")
        zf = z.float()
        jac = torch.func.jacrev(lambda u: u * zf)(torch.ones(3))
        scg.cost(jac.sum(), name="c")
    with scg.Graph(strict=True), pytest.raises(scg.InfluenceLostError, match="torch.func"):
        z = scg.sample(Categorical(logits=THETA), name="z")
        zf = z.float()
        torch.func.grad(lambda u: (u * zf).sum())(torch.ones(3))
    assert g.nodes


def test_vmap_over_a_whole_graph_is_refused_clearly() -> None:
    def step(t: torch.Tensor) -> torch.Tensor:
        with scg.Graph() as g:
            z = scg.sample(Normal(t, 1.0), name="z")
            scg.cost((z**2).sum(), name="c")
        return g.surrogate_loss()

    with pytest.raises(scg.SCGError, match=r"inside torch.func.vmap.*batch dimension"):
        torch.vmap(step, randomness="different")(torch.zeros(4, 3))


@pytest.mark.parametrize("how", ["categorical", "multinomial", "bernoulli", "normal_sample"])
def test_untracked_draw_from_parameter_probabilities_warns(how: str) -> None:
    with scg.Graph() as g, pytest.warns(scg.UntrackedRandomnessWarning, match="probabilities that require grad"):
        z = scg.sample(Normal(torch.zeros(3), 1.0), name="z")
        if how == "categorical":
            k = Categorical(logits=THETA).sample().float()
        elif how == "multinomial":
            k = torch.multinomial(torch.softmax(THETA, -1), 1).float().sum()
        elif how == "bernoulli":
            k = torch.distributions.Bernoulli(logits=THETA).sample().sum()
        else:
            k = Normal(THETA, 1.0).sample().sum()  # .sample(), not rsample: no gradient
        scg.cost(z.sum() + k, name="c")
    g.surrogate_loss()


DRAWS = {  # a hidden draw from θ's distribution, and the name the warning gives it
    "torch.bernoulli": (lambda: torch.bernoulli(torch.sigmoid(THETA)), r"bernoulli\(\)"),
    "torch.poisson": (lambda: torch.poisson(THETA.exp()), r"poisson\(\)"),
    "torch.normal": (lambda: torch.normal(THETA, 1.0), r"normal\(\)"),
    "torch.normal std": (lambda: torch.normal(torch.zeros(3), THETA.exp()), r"normal\(\)"),
    "Exponential": (lambda: D.Exponential(THETA.exp()).sample(), r"Exponential.sample\(\)"),
    "Uniform": (lambda: D.Uniform(THETA, THETA + 1).sample(), r"Uniform.sample\(\)"),
    "Laplace": (lambda: D.Laplace(THETA, 1.0).sample(), r"Laplace.sample\(\)"),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(logits=THETA).sample(), r"ContinuousBernoulli.sample"),
    "Kumaraswamy": (lambda: D.Kumaraswamy(THETA.exp(), 1.0).sample(), r"Kumaraswamy.sample\(\)"),
    "RelaxedBernoulli": (lambda: D.RelaxedBernoulli(0.5, logits=THETA).sample(), r"RelaxedBernoulli.sample"),
    "NegativeBinomial": (lambda: D.NegativeBinomial(3, logits=THETA).sample(), r"NegativeBinomial.sample"),
}


@pytest.mark.parametrize("how", list(DRAWS))
def test_a_draw_whose_gradient_is_lost_warns_however_torch_draws_it(how: str) -> None:
    """``torch.bernoulli``, ``torch.poisson`` and ``torch.normal`` return a result that requires
    grad (a zero gradient by definition: d/dθ E[torch.normal(θ, 1).sum()] = 1 per entry, the
    surrogate's 0; ``torch.normal`` was silent until helper-F), and ``Exponential`` & co. draw
    noise from a fresh tensor, then apply θ under ``no_grad``: none of them warned, and the
    gradient silently lost the draw's dependence on θ (0 where d/dθ E was 0.25 for the Bernoulli)."""
    draw, name = DRAWS[how]
    with scg.Graph() as g, pytest.warns(scg.UntrackedRandomnessWarning, match=name + ".*require grad"):
        z = scg.sample(Normal(torch.zeros(3), 1.0), name="z")
        scg.cost(z.sum() + draw().float().sum(), name="c")
    g.surrogate_loss()


def test_a_distribution_sampled_from_a_nodes_value_warns_naming_the_node() -> None:
    with scg.Graph() as g, pytest.warns(scg.UntrackedRandomnessWarning, match=r"Uniform.sample\(\).*node\(s\) 'k'"):
        k = scg.sample(D.Bernoulli(logits=THETA), name="k")
        scg.cost(D.Uniform(k, k + 1).sample().sum(), name="c")
    g.surrogate_loss()


@pytest.mark.parametrize("inner", [None, scg.Declared()])
def test_a_graph_nested_in_a_tracked_graph_draws_without_warning(inner: scg.Declared | None) -> None:
    """The outer graph's tracker sees the inner graph's draws too: they are scg's own, not
    hidden randomness (it warned "bernoulli() ... outside scg.sample" on the inner scg.sample)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.UntrackedRandomnessWarning)
        with scg.Graph():
            with scg.Graph(structure=inner) as h:
                y = scg.sample(D.Bernoulli(logits=THETA), name="y")
                scg.cost(y * 1.0, name="c")
            h.surrogate_loss()


def test_noise_shaped_like_a_parameter_and_rsample_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.UntrackedRandomnessWarning)
        with scg.Graph() as g:
            z = scg.sample(Normal(torch.zeros(3), 1.0), name="z")
            eps = torch.randn_like(THETA)  # reads the shape only
            y = Normal(THETA, 1.0).rsample()  # pathwise: the gradient flows
            scg.cost(z.sum() + (THETA + eps).sum() + y.sum(), name="c")
            with torch.no_grad():  # a draw whose probabilities carry no gradient
                torch.multinomial(torch.softmax(THETA, -1), 1)
        g.surrogate_loss()


@pytest.mark.slow  # inductor compiles the function for the declared graph: ~5-10 s on a busy CPU
def test_compiled_cost_function_inside_a_tracked_graph_points_to_declared() -> None:
    torch._dynamo.reset()
    cost_fn = torch.compile(lambda x: (x**2).sum())
    with pytest.raises(scg.SCGError, match=r"torch.compile.*tracked scg.Graph.*scg.Declared"):
        with scg.Graph():
            z = scg.sample(Normal(THETA, 1.0), name="z")
            scg.cost(cost_fn(z), name="c")
    with scg.Graph(structure=scg.Declared()) as g:  # no mode: the compiled function runs
        z = scg.sample(Normal(THETA, 1.0), name="z")
        scg.cost(cost_fn(z), name="c")
    g.surrogate_loss().backward()
    torch._dynamo.reset()


def test_torch_cond_inside_a_tracked_graph_names_scg() -> None:
    """torch.cond compiles its branches and allows no graph break: inside a tracked graph it
    failed in torch with "User-inserted graph break. Message: None", naming nothing of scg
    (helper-F); the graph break now carries scg's refusal."""
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"tracked scg.Graph \(or torch.cond.*scg.Declared"):
        with scg.Graph():
            z = scg.sample(Normal(THETA, 1.0), name="z")
            scg.cost(torch.cond(torch.tensor(True), lambda x: x * 2.0, lambda x: x * 3.0, (z,)).sum(), name="c")
    torch._dynamo.reset()


@pytest.mark.parametrize("alias", ["parameter_float", "parameter_clone", "subclass_long"])
def test_alias_of_a_cast_of_a_sample_keeps_its_influence(alias: str) -> None:
    """``nn.Parameter(z.float())`` shares the storage of the cast, which no torch call links to
    ``z``; the tracker records the storages of casts and copies of tracked values, with the
    geometry and positions of the value first stored there, so an exact alias keeps per-element
    credit (it was whole-plate while the positions were not recorded)."""

    class Marked(torch.Tensor):
        pass

    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=THETA.expand(4, 3)), name="z")
        if alias == "parameter_float":
            p = torch.nn.Parameter(z.float())
        elif alias == "parameter_clone":
            p = torch.nn.Parameter(z.float().clone())
        else:
            p = z.double().as_subclass(Marked)
        scg.cost(p * 2.0, name="c")
    g.surrogate_loss()
    assert g.influences("z", "c")
    assert g.credit("z", "c") == "per-element"


def test_an_unnamed_node_skips_a_default_name_already_given() -> None:
    """``name="sample_1"`` then two unnamed nodes: the second was refused as a duplicate
    'sample_1' at the line of a call that gave no name."""
    with scg.Graph() as g:
        scg.sample(D.Bernoulli(logits=THETA), name="sample_1")
        a = scg.sample(D.Bernoulli(logits=THETA))
        b = scg.sample(D.Bernoulli(logits=THETA))
        scg.cost(a + b, name="c")
    assert [n.name for n in g.stochastic_nodes] == ["sample_1", "sample_2", "sample_3"]


def test_surrogate_options_numpy_scalars_and_a_negative_score_scale() -> None:
    def graph() -> scg.Graph:
        with scg.Graph() as g:
            z = scg.sample(D.Bernoulli(logits=THETA), name="z", step=0)
            scg.cost(z * 1.0, name="c", step=1)
        return g

    torch.manual_seed(0)
    a = graph().surrogate_loss(discount=np.float32(0.5), score_scale=np.float64(2.0))
    torch.manual_seed(0)
    torch.testing.assert_close(a, graph().surrogate_loss(discount=0.5, score_scale=2.0))
    with pytest.raises(scg.SCGError, match=r"score_scale=...\): expected a finite number >= 0, got -1"):
        graph().surrogate_loss(score_scale=-1)


def test_a_self_critical_value_of_the_wrong_shape_names_the_baseline() -> None:
    with scg.Graph() as g:
        z = scg.sample(D.Bernoulli(logits=THETA), name="z", baseline=scg.baselines.SelfCritical(torch.ones(2)))
        scg.cost(z * 1.0, name="c")
    with pytest.raises(
        scg.SCGError, match=r"SelfCritical baseline of stochastic node 'z'.*greedy cost has shape \(2,\).*\(3,\)"
    ):
        g.surrogate_loss()


def _graph_with(
    sample: dict[str, object] | None = None, cost: Callable[[torch.Tensor], torch.Tensor] | None = None
) -> scg.Graph:
    with scg.Graph() as g:
        z = scg.sample(D.Bernoulli(logits=THETA), name="z", **(sample or {}))  # type: ignore[arg-type]
        scg.cost(cost(z) if cost is not None else z * 1.0, name="c")
    return g


def _relaxed_log_prob() -> None:
    with scg.Graph():
        z = scg.sample(D.OneHotCategorical(logits=THETA), name="z", estimator=scg.estimators.GumbelSoftmax(1.0))
        scg.log_prob(z)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: scg.Graph(intervene=5), r"Graph\(intervene=...\): expected None or a function"),
        (lambda: scg.Graph(strict="yes"), r"Graph\(strict=...\): expected True or False, got 'yes'"),
        (lambda: scg.surrogate_loss(None), r"surrogate_loss\(graph\): expected a scg.Graph, got NoneType"),
        (lambda: _graph_with().surrogate_loss(discount=True), r"discount=...\): expected None or a number in \[0, 1\]"),
        (lambda: _graph_with({"plates": 5}), r"plates=5\) .*1 batch dimension\(s\).*fewer than its plates"),
        (lambda: _graph_with({"plates": 2}), r"plates=2\) .*1 batch dimension\(s\).*fewer than its plates"),
        (lambda: _graph_with(cost=lambda z: scg.influenced_by(z * 1.0)), r"influenced_by at .*no sources"),
        (
            lambda: _graph_with(cost=lambda z: scg.influenced_by(torch.ones(5), z, per_element=True).sum()),
            r"per_element=True\) .*source 0 has 3 rows and the value 5",
        ),
        (_relaxed_log_prob, r"log_prob\(value\) .*GumbelSoftmax.*relaxation outside the support"),
        (lambda: scg.declare_rowwise(torch.tanh, args="x"), r"declare_rowwise\(args=...\): expected None or argument"),
        (lambda: scg.declare_rowwise(lambda x: x), r"a lambda has no name torch reports its calls by"),
        (lambda: scg.declare_rowwise(5), r"declare_rowwise\(op\): expected a function"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_argument_is_refused_naming_it(call: Callable[[], object], message: str) -> None:
    """Each of these was accepted silently (and did nothing, or something else) or failed inside
    torch / Python naming no argument."""
    with pytest.raises((scg.SCGError, ValueError), match=message):
        call()


class _ListSample(D.Bernoulli):
    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        return [0.0, 1.0, 0.0]  # type: ignore[return-value]


class _FloatLogProb(D.Bernoulli):
    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return 0.5  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("graph", "dist", "message"),
    [
        ({}, lambda: _ListSample(logits=THETA), r"sample\(name='z'\) .*the draw of _ListSample .*returned list"),
        ({}, lambda: _FloatLogProb(logits=THETA), r"sample\(name='z'\) .*_FloatLogProb.log_prob returned float"),
        (
            {"intervene": lambda name, step, dist, shape: torch.ones(3, dtype=torch.long)},
            lambda: D.Bernoulli(logits=THETA),
            r"sample\(name='z'\) .*Bernoulli.log_prob of the node's value \(dtype torch.int64, shape \(3,\)\) failed",
        ),
    ],
)
def test_a_draw_or_score_of_the_wrong_kind_names_the_node(
    graph: dict[str, object], dist: Callable[[], D.Distribution], message: str
) -> None:
    """A custom distribution's sample or log_prob of the wrong type, and an intervention of the
    wrong dtype, failed inside scg or torch (AttributeError, a cast error) naming no node."""
    with pytest.raises(scg.SCGError, match=message), scg.Graph(**graph):  # type: ignore[arg-type]
        scg.sample(dist(), name="z")


def test_a_graph_runs_under_inference_mode() -> None:
    """An evaluation pass under torch.inference_mode crashed inside scg (inference tensors keep no
    version counter), in every mode."""
    net = torch.nn.Linear(4, 3)
    x = torch.randn(8, 4)
    for structure in (None, scg.Declared()):
        with torch.inference_mode(), scg.Graph(intervene=scg.estimators.greedy, structure=structure) as g:
            z = scg.sample(Categorical(logits=net(x)), name="z")
            scg.cost((z == 0).float(), name="err")
        assert g.node("z").version is None  # type: ignore[attr-defined]
        assert torch.equal(z, net(x).argmax(-1).detach())


def test_a_checkpointed_function_that_samples_is_named_as_such() -> None:
    """Its recomputation in backward called scg.sample outside any graph, and the message spoke
    of worker threads."""
    from torch.utils.checkpoint import checkpoint

    lin = torch.nn.Linear(4, 4)

    def block(x: torch.Tensor) -> torch.Tensor:
        return scg.sample(D.Bernoulli(logits=lin(x)), name="h")

    with scg.Graph() as g:
        h = checkpoint(block, torch.randn(8, 4), use_reentrant=False)
        scg.cost(h.sum(-1), name="c")
    with pytest.raises(scg.SCGError, match=r"during the backward pass.*torch.utils.checkpoint"):
        g.surrogate_loss().backward()


def test_a_cost_baseline_of_an_episode_that_ends_early_is_refused() -> None:
    """The step-1 cost exists only when the episode goes on (`if not z.all()`): its baseline enters
    as 1{c exists}·b, a function of z, and was subtracted from z's credit (max |z| = 25.8 against
    the exact gradient). Refused; the same baseline on the node, or a terminal cost made on every
    draw (self-critical training's reward), is accepted."""
    theta = torch.zeros(2, requires_grad=True)

    def program(cost_baseline: bool, per_step: bool = True) -> None:
        node_baseline = None if cost_baseline else scg.baselines.Constant(1.0)
        z = scg.sample(D.Bernoulli(logits=theta), name="z", baseline=node_baseline)
        scg.cost(1.0 - z, name="c", step=0 if per_step else None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scg.InfluenceLostWarning)
            go_on = not bool(z.bool().all())
        if go_on or not per_step:
            later = scg.influenced_by(torch.zeros(2), z)
            baseline = scg.baselines.Constant(1.0) if cost_baseline else None
            scg.cost(later, name="c" if per_step else "end", step=1 if per_step else None, baseline=baseline)

    torch.manual_seed(0)  # (z = (0, 0) or another draw that goes on)
    for _ in range(20):
        with scg.Graph() as g:
            program(cost_baseline=True)
        if len(g.cost_nodes) == 2:
            break
    with pytest.raises(scg.SCGError, match=r"cost node 'c' \(step 1.*has a baseline.*`if done.all\(\): break`"):
        g.surrogate_loss()
    for kwargs in ({"cost_baseline": False}, {"cost_baseline": True, "per_step": False}):
        with scg.Graph() as g:
            program(**kwargs)
        assert g.surrogate_loss().requires_grad


def test_a_node_drawn_under_no_grad_in_a_training_graph_warns() -> None:
    """Its score term had no gradient: torch's own error at backward, or a gradient missing the node
    (a reentrant checkpoint runs its function under no_grad). A greedy rerun in its own graph opened
    under no_grad draws without a warning."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(), pytest.warns(scg.InfluenceLostWarning, match=r"'h'.*drew under torch.no_grad\(\)"):
        with torch.no_grad():
            h = scg.sample(D.Bernoulli(logits=theta), name="h")
        scg.cost(h * 1.0, name="c")
    with warnings.catch_warnings():
        warnings.simplefilter("error", scg.InfluenceLostWarning)
        with torch.no_grad(), scg.Graph(intervene=scg.estimators.greedy):
            scg.cost(scg.sample(D.Bernoulli(logits=theta), name="h") * 1.0, name="c")
