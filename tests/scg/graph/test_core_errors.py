"""Bad input gets a clear SCGError naming the node and where it was created."""

from __future__ import annotations

import pickle

import pytest
import torch
from _graph_modes import MODES, graph_in
from torch.distributions import Bernoulli, Categorical, Distribution, Normal

import scg
import scg.viz


def test_sample_and_cost_outside_graph() -> None:
    with pytest.raises(scg.SCGError, match=r"scg.sample\(name='z'\) at .*test_core_errors.py:\d+.*outside a graph"):
        scg.sample(Categorical(logits=torch.zeros(2)), name="z")
    with pytest.raises(scg.SCGError, match=r"scg.cost\(name='c'\).*outside a graph"):
        scg.cost(torch.zeros(()), name="c")


def test_not_a_distribution() -> None:
    with scg.Graph(), pytest.raises(scg.SCGError, match="expected a torch.distributions"):
        scg.sample(torch.zeros(3), name="z")  # type: ignore[arg-type]


class _NoLogProb(Distribution):
    arg_constraints: dict[str, object] = {}

    def __init__(self) -> None:
        super().__init__(torch.Size([2]), validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        return torch.zeros(sample_shape + torch.Size([2]))


class _WrongLogProb(_NoLogProb):
    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return value.sum()  # () instead of the batch shape (2,)


def test_distribution_without_log_prob() -> None:
    with scg.Graph(), pytest.raises(scg.SCGError, match=r"'bad'.*does not implement log_prob"):
        scg.sample(_NoLogProb(), name="bad")


def test_pathwise_without_rsample() -> None:
    with scg.Graph(), pytest.raises(scg.SCGError, match=r"'z'.*Categorical has no rsample"):
        scg.sample(Categorical(logits=torch.zeros(2)), name="z", estimator=scg.Pathwise())


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_cost_named(bad: float) -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.zeros(2)), name="z")
        scg.cost(z.float() * 0 + 1.0, name="fine")
        scg.cost(z.float() * 0 + bad, name="broken")
    with pytest.raises(scg.SCGError, match=r"cost node 'broken'.*not finite"):
        g.surrogate_loss()


def test_cost_shape_mismatch_names_both_nodes() -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.zeros(4, 2)), name="z")
        scg.cost(z.float()[:3], name="short")
    with pytest.raises(scg.SCGError, match=r"cost node 'short'.*\(3,\).*stochastic node 'z'"):
        g.surrogate_loss()


def test_surrogate_twice_and_empty_graph() -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.zeros(2)), name="z")
        scg.cost(z.float(), name="c")
    g.surrogate_loss()
    with pytest.raises(scg.SCGError, match="already called"):
        g.surrogate_loss()
    with scg.Graph() as empty:
        scg.sample(Categorical(logits=torch.zeros(2)), name="z")
    with pytest.raises(scg.SCGError, match="no cost nodes"):
        empty.surrogate_loss()


def test_graph_cannot_be_reentered_and_names_are_unique() -> None:
    g = scg.Graph()
    with g:
        scg.sample(Categorical(logits=torch.zeros(2)), name="z", step=0)
        scg.sample(Categorical(logits=torch.zeros(2)), name="z", step=1)
        with pytest.raises(scg.SCGError, match="duplicate node name 'z' at step 1"):
            scg.sample(Categorical(logits=torch.zeros(2)), name="z", step=1)
    with pytest.raises(scg.SCGError, match="cannot be entered twice"), g:
        pass


@pytest.mark.parametrize(
    ("value", "match"),
    [(1.0, "Python number"), (torch.tensor([1, 2]), "floating-point"), ("x", "expected a tensor")],
)
def test_bad_cost_values(value: object, match: str) -> None:
    with scg.Graph(), pytest.raises(scg.SCGError, match=match):
        scg.cost(value, name="c")  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("structure", [None, "declared"])
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_cost_is_refused_naming_it(structure: str | None, layout: str) -> None:
    """A sparse cost passed scg.cost and failed in the surrogate's credit code with a bare torch
    RuntimeError ("expand is unsupported for Sparse tensors")."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared() if structure else None):
        z = scg.sample(Bernoulli(logits=theta), name="z")
        value = z.to_sparse() if layout == "coo" else z.reshape(1, 3).to_sparse_csr()
        with pytest.raises(
            scg.SCGError, match=r"scg.cost\(name='c'\) at .*test_core_errors.py:\d+: .*dense.*layout torch.sparse"
        ):
            scg.cost(value, name="c")
        scg.cost(value.to_dense(), name="c")  # (the suggested fix is accepted)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("structure", [None, "declared"])
def test_a_nested_cost_is_refused_naming_it(structure: str | None) -> None:
    """A strided nested tensor has layout torch.strided: it passed the layout check and failed
    reading its sizes inside scg ("NestedTensorImpl doesn't support sizes", helper-F)."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared() if structure else None):
        z = scg.sample(Bernoulli(logits=theta), name="z")
        value = torch.nested.as_nested_tensor([z[:1], z[1:]])
        with pytest.raises(scg.SCGError, match=r"scg.cost\(name='c'\) at .*test_core_errors.py:\d+: .*nested tensor"):
            scg.cost(value, name="c")
        scg.cost(value.to_padded_tensor(0.0), name="c")  # (the suggested fix is accepted)


def test_bad_arguments() -> None:
    d = Normal(torch.zeros(2), 1.0)
    with scg.Graph():
        with pytest.raises(scg.SCGError, match="step must be an int"):
            scg.sample(d, name="x", step="1")  # type: ignore[arg-type]
        with pytest.raises(scg.SCGError, match="step must be an int, got True"):  # (a bool is not a step)
            scg.sample(d, name="x", step=True)
        with pytest.raises(scg.SCGError, match="n must be a positive int"):
            scg.sample(d, name="x", n=0)
        with pytest.raises(scg.SCGError, match="baseline= needs a score-function"):
            scg.sample(d, name="x", baseline=scg.baselines.Constant(0.0))
        with pytest.raises(scg.SCGError, match="both to the estimator and as baseline="):
            scg.sample(
                Categorical(logits=torch.zeros(2)),
                name="z",
                estimator=scg.ScoreFunction(scg.baselines.Constant(1.0)),
                baseline=scg.baselines.Constant(0.0),
            )
    with pytest.raises(scg.SCGError, match="beta must be in"):
        scg.baselines.EMA(0.0)
    with pytest.raises(scg.SCGError, match="finite"):
        scg.baselines.Constant(float("nan"))
    with pytest.raises(scg.SCGError, match=r"scg.Cached\(seed=...\): expected an int, got \[1\]"):
        scg.Cached(seed=[1])  # type: ignore[arg-type]
    with pytest.raises(scg.SCGError, match=r"to_networkx\(graph\): expected a scg.Graph, got str"):
        scg.viz.to_networkx("g")  # type: ignore[arg-type]
    with scg.Graph(intervene=lambda name: None):  # type: ignore[arg-type, misc]
        with pytest.raises(scg.SCGError, match=r"intervene=...\): calling it as intervene\(name, step, dist"):
            scg.sample(Categorical(logits=torch.zeros(2)), name="z")

    class NoSample(Distribution):
        arg_constraints: dict[str, object] = {}

        def __init__(self) -> None:
            super().__init__(torch.Size(), validate_args=False)

    with scg.Graph():
        with pytest.raises(scg.SCGError, match=r"name='w'.*NoSample does not implement the draw"):
            scg.sample(NoSample(), name="w")
    theta = torch.zeros(2, requires_grad=True)
    with scg.Graph() as g:
        scg.cost(scg.sample(Categorical(logits=theta), name="z").float(), name="c")
    with pytest.raises(scg.SCGError, match=r"surrogate_loss\(dice=...\): expected True or False, got 'no'"):
        g.surrogate_loss(dice="no")  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match=r"surrogate_loss\(\) under torch.no_grad\(\): the loss has no gradient"):
        with torch.no_grad():
            g.surrogate_loss()


def test_discount_needs_steps_in_order() -> None:
    with scg.Graph() as g:
        z = scg.sample(Categorical(logits=torch.zeros(2)), name="z")
        scg.cost(z.float(), name="c", step=0)
    with pytest.raises(scg.SCGError, match="stochastic node 'z'.*has no step"):
        g.surrogate_loss(discount=0.5)
    with scg.Graph() as g2:
        z = scg.sample(Categorical(logits=torch.zeros(2)), name="z", step=3)
        scg.cost(z.float(), name="c", step=1)
    with pytest.raises(scg.SCGError, match="at an earlier step"):
        g2.surrogate_loss(discount=0.5)


def test_influenced_by_rejects_python_values() -> None:
    with scg.Graph():
        z = scg.sample(Categorical(logits=torch.zeros(2)), name="z")
        with pytest.raises(scg.SCGError, match="source 0 is a int"):
            scg.influenced_by(torch.zeros(()), 3)  # type: ignore[arg-type]
        with pytest.raises(scg.SCGError, match="not computed from any node"):
            scg.influenced_by(z.float(), torch.zeros(()))


def test_node_lookup_errors() -> None:
    with scg.Graph() as g:
        scg.sample(Categorical(logits=torch.zeros(2)), name="z")
        scg.cost(torch.zeros(()), name="c")
    with pytest.raises(scg.SCGError, match=r"no node named 'q'.*known nodes: 'c', 'z'"):
        g.influences("q", "c")


@pytest.mark.parametrize("mode", ["tracked", "declared"])
def test_node_locations_name_the_users_line(mode: str) -> None:
    """A node's location is the user's file and line, formatted when first read (the fast
    path keeps the code object and instruction offset only), in a long function too."""
    structure = scg.Declared() if mode == "declared" else None
    src = (
        "def program(scg, torch, Categorical):\n"
        + "".join(f"    x{i} = {i}\n" for i in range(300))
        + "    z = scg.sample(Categorical(logits=torch.zeros(3)), name='z')\n"
        + "    scg.cost(z.float(), name='c')\n"
    )
    code = compile(src, "long_user_module.py", "exec")
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with scg.Graph(structure=structure) as g:
        namespace["program"](scg, torch, Categorical)  # type: ignore[operator]
    z, c = g.node("z"), g.node("c")
    assert str(z.location) == "long_user_module.py:302"
    assert f"{c.location}" == "long_user_module.py:303"
    assert z.location == "long_user_module.py:302" and z.location != c.location
    assert "created at long_user_module.py:303" in c.describe()
    assert scg.viz.to_networkx(g).nodes["z"]["location"] == "long_user_module.py:302"
    assert pickle.loads(pickle.dumps(z.location)) == "long_user_module.py:302"


def test_untracked_fast_path_keeps_the_checks() -> None:
    """``scg.sample`` / ``scg.cost`` in a declared graph still refuse duplicate names, bad steps
    and names, a closed graph, and name the node of a non-finite cost."""
    theta = torch.zeros(3, requires_grad=True)
    with scg.Graph(structure=scg.Declared()) as g:
        z = scg.sample(Categorical(logits=theta), name="z", step=0)
        with pytest.raises(scg.SCGError, match=r"duplicate node name 'z' at step 0 at .*test_core_errors.py:\d+"):
            scg.sample(Categorical(logits=theta), name="z", step=0)
        with pytest.raises(scg.SCGError, match=r"step must be an int, got 1.5"):
            scg.cost(z.float(), name="c", step=1.5)  # type: ignore[arg-type]
        with pytest.raises(scg.SCGError, match=r"name must be a non-empty string"):
            scg.cost(z.float(), name="")
        scg.cost(z.float() / 0.0 + float("inf"), name="bad", step=0)
        scg.cost(z.float(), step=1)
    assert [n.name for n in g.nodes] == ["z", "bad", "cost_1"]
    bad = r"cost node 'bad' \(step 0, created at .*test_core_errors.py:\d+\) is not finite"
    with pytest.raises(scg.SCGError, match=bad):
        g.surrogate_loss()
    with scg.Graph(structure=scg.Declared()) as closed:
        pass
    with pytest.raises(scg.SCGError, match=r"scg.cost\(name='late'\) at here: the graph is not open"):
        closed._name("late", "cost", None, "here")


@pytest.mark.filterwarnings("ignore:scg.Cached:RuntimeWarning")  # (a Cached graph of a new signature, untracked)
@pytest.mark.parametrize("mode", MODES)
def test_refusals_name_the_node_in_every_mode(mode: str) -> None:
    with graph_in(mode) as g:
        assert g.tracked == (mode == "tracked")
        with pytest.raises(scg.SCGError, match=r"'bad'.*does not implement log_prob"):
            scg.sample(_NoLogProb(), name="bad")
        with pytest.raises(scg.SCGError, match=r"'wrong'.*log_prob has shape \(\), expected .*\(2,\)"):
            scg.sample(_WrongLogProb(), name="wrong")
        with pytest.raises(scg.SCGError, match=r"scg.sample\(name='z'\) at .*test_core_errors.py:\d+.*no rsample"):
            scg.sample(Categorical(logits=torch.zeros(2)), name="z", estimator=scg.Pathwise())
        with pytest.raises(scg.SCGError, match=r"scg.cost\(name='c'\) at .*test_core_errors.py:\d+.*dtype"):
            scg.cost(torch.zeros(2, dtype=torch.long), name="c")
        z = scg.sample(Bernoulli(logits=torch.zeros(2)), name="z")
        with pytest.raises(scg.SCGError, match="duplicate node name 'z'"):
            scg.sample(Bernoulli(logits=torch.zeros(2)), name="z")
        scg.cost(z, name="c")
        g.surrogate_loss()
        with pytest.raises(scg.SCGError, match=r"scg.cost\(name='late'\) at .*surrogate_loss\(\) was already built"):
            scg.cost(z, name="late")
    with pytest.raises(scg.SCGError, match=r"scg.sample\(name='out'\) at .*test_core_errors.py:\d+.*outside a graph"):
        scg.sample(Bernoulli(logits=torch.zeros(2)), name="out")
