"""How the tracker classifies a torch call: metadata, escapes, data-dependent shapes, hidden
randomness, in-place writes; and where the user's code is (for messages naming file and line).

Everything here is computed once per torch function (`info`) and cached.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from scg.graph import positions

__all__ = [
    "ESCAPES",
    "F_COPY",
    "F_DYNAMIC",
    "F_ELEMENTWISE",
    "F_GETITEM",
    "F_METADATA",
    "F_MUTATES",
    "F_OTHERS_META",
    "F_PAIRED",
    "F_RANDOM",
    "F_RUNNING_STATS",
    "F_SELF_META",
    "F_SET",
    "F_SHAPE",
    "F_SIZES",
    "F_ZERO_GRAD",
    "INFO",
    "SIZE_ARGUMENTS",
    "flat_tensors",
    "func_name",
    "info",
    "is_tensor_result",
    "outside_libraries",
    "running_statistics",
    "shape_index_tensors",
    "slice_tensors",
    "user_frame",
]

Tensor = torch.Tensor

#: Tensor methods whose result is a Python value: data flow that scg cannot follow (the general
#: rule, any non-tensor result, covers many more; these are the classic ones).
ESCAPES: frozenset[Callable[..., Any]] = frozenset(
    {
        Tensor.item,
        Tensor.tolist,
        Tensor.numpy,
        Tensor.__bool__,
        Tensor.__int__,
        Tensor.__float__,
        Tensor.__index__,
        Tensor.__complex__,
    }
)

#: Queries about a tensor's metadata, not its values (not escapes, unless the shape is
#: data-dependent: see _SHAPE_QUERIES).
_METADATA = frozenset(
    """
size dim ndim ndimension numel nelement __len__ shape stride element_size storage_offset data_ptr
_version get_device nbytes itemsize requires_grad is_leaf is_contiguous is_floating_point
is_complex is_cuda is_sparse is_quantized is_meta is_nested is_signed is_inference is_shared
is_pinned is_mps is_xpu is_mkldnn is_cpu dtype device layout grad_fn names grad output_nr _cdata
__hash__ __reduce_ex__ __getstate__ __setstate__ untyped_storage storage __dlpack_device__
_is_view is_set_to has_names is_coalesced dim_order __sizeof__ __dir__ _base retains_grad
_typed_storage __class__ backward register_hook retain_grad __array_priority__
_grad_fn _backward_hooks is_neg is_conj
""".split()
)

#: Queries that read a shape: escapes when the shape depends on sampled values.
_SHAPE_QUERIES = frozenset("size numel nelement __len__ shape nbytes stride".split())

#: Operations whose output shape depends on the values of their input.
_DYNAMIC_SHAPE = frozenset(
    """nonzero masked_select unique unique_consecutive argwhere bincount
repeat_interleave nonzero_static""".split()
)

#: Random operations: a draw outside scg.sample is not a stochastic node.
_RANDOM = frozenset(
    """bernoulli bernoulli_ multinomial normal normal_ poisson binomial
_standard_gamma _sample_dirichlet exponential_ geometric_ uniform_ cauchy_ log_normal_ random_
rand randn randint rand_like randn_like randint_like""".split()
)

#: Frames in these modules are wrappers between the user's call and the mode.
_WRAPPERS = frozenset(
    {
        "torch.overrides",
        "torch._tensor",
        "torch.functional",
        "torch._jit_internal",
        "torch.nn.functional",
        "torch.utils._device",
        "torch._tensor_str",
        "torch.utils.dlpack",
    }
)

#: Escapes inside these packages are their own business (e.g. argument validation), not user data flow.
_LIBRARY_MODULES = frozenset({"torch", "scg", "numpy"})

_MUTATING_CACHE: dict[Callable[..., Any], bool] = {}

#: ``add`` for ``torch.add``/``Tensor.add``; ``shape`` for the ``Tensor.shape`` getter (one cache,
#: shared with the position rules).
func_name = positions.name_of


def _mutates_first_arg(func: Callable[..., Any]) -> bool:
    """True for in-place methods (``add_``), ``__setitem__`` and ``out=``-less writes."""
    known = _MUTATING_CACHE.get(func)
    if known is None:
        name = func_name(func)
        known = name == "__setitem__" or (name.endswith("_") and not name.endswith("__"))
        _MUTATING_CACHE[func] = known
    return known


#: Operations with one output per tensor argument, output k computed from argument k alone.
_PAIRED = frozenset("broadcast_tensors atleast_1d atleast_2d atleast_3d meshgrid".split())

#: Floating-point operations whose derivative is zero wherever it exists (step functions): the
#: gradient of a pathwise sample does not pass through them (a *gradient break*).
_ZERO_GRAD = frozenset(
    "round round_ floor floor_ ceil ceil_ trunc trunc_ fix fix_ sign sign_ sgn sgn_ heaviside".split()
)

F_METADATA, F_SHAPE, F_RANDOM, F_MUTATES, F_ELEMENTWISE, F_DYNAMIC, F_GETITEM, F_PAIRED = (1, 2, 4, 8, 16, 32, 64, 128)
F_ZERO_GRAD = 256
F_COPY = 512
F_SELF_META = 1024
F_OTHERS_META = 2048
#: a normalization that may update running statistics inside its kernel (`running_statistics`)
F_RUNNING_STATS = 4096
#: a size, bound or count argument: an integer tensor given there makes the output's shape
#: depend on its value (``torch.ones(n)``, ``x.narrow(0, 0, n)``; for a method, not its tensor)
F_SIZES = 8192

#: an op that reads the values of a nested tensor out (``unbind``, ``to_padded_tensor``, ``nt[i]``):
#: ``torch.nested.nested_tensor`` copies its tensors without a torch call, so a nested tensor
#: read with no marks in a graph with nodes may hold their values unseen (`_NESTED_READS`)
F_NESTED_READ = 16384

#: ``torch.autograd.grad``, ``backward`` and the ``.grad`` getter (named ``grad`` too): gradients
#: computed inside the graph depend on the values the differentiated tensors were computed from,
#: which torch's autograd engine computes without a torch call the tracker sees
F_GRADIENTS = 32768

#: a descriptor's ``__set__`` (``t.data = v``, ``t.grad = g``): an op that may move a tensor to another
#: storage, looked up once per function instead of comparing its name on every call
F_SET = 65536

#: the op names of `F_GRADIENTS`
_GRADIENTS = frozenset("grad backward".split())

#: the op names of `F_NESTED_READ`
_NESTED_READS = frozenset("unbind to_padded_tensor nested_to_padded_tensor __getitem__ select values".split())

#: the ops of `F_SIZES` -> the positions of their arguments that are sizes, bounds or counts (an
#: int k: every position from k on; a method's own tensor, position 0, never is one)
SIZE_ARGUMENTS: dict[str, tuple[int, ...] | int] = {
    **dict.fromkeys(("zeros", "ones", "empty", "eye", "arange", "range"), 0),
    **dict.fromkeys(("expand", "view", "reshape", "repeat", "tile", "new_zeros", "new_ones", "new_empty"), 1),
    **dict.fromkeys(("split", "tensor_split", "chunk", "split_with_sizes", "topk", "kthvalue", "new_full"), (1,)),
    "full": (0,),
    "linspace": (2,),
    "logspace": (2,),
    "narrow": (3,),
    "unflatten": (2,),
}

#: the op names of `F_RUNNING_STATS` (an embedding's table renormalized by ``max_norm`` too)
_NORMALIZATIONS = frozenset({"batch_norm", "instance_norm", "embedding", "embedding_bag"})

#: Operations that read only the metadata (dtype, device, shape) of a tensor argument, not its
#: values: ``x.new_full(size, v)`` of ``x`` (``new_tensor(data)`` copies ``data``, which is
#: data flow), and ``x.to(y)``, ``x.type_as(y)``, ``x.view_as(y)``, ``x.reshape_as(y)``,
#: ``x.expand_as(y)`` of every argument after ``x``. Their output does not take the influence of
#: those arguments: a batched node's influence on a constant ``b.to(cost)`` would make it
#: influence every element of what it is broadcast into (whole-plate credit where the credit is
#: per element).
_SELF_META = frozenset("new_zeros new_ones new_full new_empty new_tensor".split())
_OTHERS_META = frozenset("to type_as view_as reshape_as expand_as".split())

#: Casts and copies: their outputs are what ``nn.Parameter(z.float())`` and ``z.float()
#: .as_subclass(C)`` alias without a torch call, so the tracker records their storages.
_COPIES = frozenset(
    """float double half bfloat16 long int short bool byte char to type type_as
clone contiguous detach cpu cuda""".split()
)
INFO: dict[Callable[..., Any], tuple[str, positions.Rule | None, int]] = {}


def info(func: Callable[..., Any]) -> tuple[str, positions.Rule | None, int]:
    """(name, position rule, flags) of a torch function, computed once."""
    name = func_name(func)
    rule = positions.rule_for(name)
    flags = (
        (F_METADATA if name in _METADATA else 0)
        | (F_SHAPE if name in _SHAPE_QUERIES else 0)
        | (F_RANDOM if name in _RANDOM else 0)
        | (F_MUTATES if _mutates_first_arg(func) else 0)
        | (F_ELEMENTWISE if positions.is_elementwise(name) else 0)
        | (F_DYNAMIC if name in _DYNAMIC_SHAPE else 0)
        | (F_GETITEM if name == "__getitem__" else 0)
        | (F_PAIRED if name in _PAIRED else 0)
        | (F_ZERO_GRAD if name in _ZERO_GRAD else 0)
        | (F_COPY if name in _COPIES else 0)
        | (F_SELF_META if name in _SELF_META else 0)
        | (F_OTHERS_META if name in _OTHERS_META else 0)
        | (F_RUNNING_STATS if name in _NORMALIZATIONS else 0)
        | (F_SIZES if name in SIZE_ARGUMENTS else 0)
        | (F_NESTED_READ if name in _NESTED_READS else 0)
        | (F_GRADIENTS if name in _GRADIENTS else 0)
        | (F_SET if name == "__set__" else 0)
    )
    got = (name, rule, flags)
    INFO[func] = got
    return got


positions.ON_CHANGE.append(INFO.clear)


def user_frame(start: FrameType | None) -> tuple[FrameType | None, bool]:
    """The first frame outside torch's wrapper modules and numpy, and whether it is library code
    (torch's or scg's own). numpy's Python functions are passed through to their caller:
    ``np.sort(z)`` reads ``z`` (``__array__``) inside numpy for whoever called it, which was
    taken for library code and not reported (helper-F)."""
    frame = start
    while frame is not None and str(frame.f_globals.get("__name__", "")) in _WRAPPERS:
        frame = frame.f_back
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".", 1)[0] == "numpy":
        frame = frame.f_back
    if frame is None:
        return None, True
    module = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
    return frame, module in _LIBRARY_MODULES


def outside_libraries(start: FrameType | None) -> FrameType | None:
    """The first frame outside torch, numpy and scg (None if there is none)."""
    frame = start
    while frame is not None:
        module = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
        if module not in _LIBRARY_MODULES:
            return frame
        frame = frame.f_back
    return None


def is_tensor_result(out: Any) -> bool:
    if out is None or isinstance(out, Tensor):
        return True
    if isinstance(out, (list, tuple)):
        if not out:
            return False
        for o in out:
            if (
                o is not None
                and not isinstance(o, Tensor)
                and not (isinstance(o, (list, tuple)) and is_tensor_result(o))
            ):
                return False  # (a list of tensors inside: histogramdd's bin edges)
        return True
    return isinstance(out, (torch.dtype, torch.device, torch.Size, torch.layout))


def flat_tensors(out: Any) -> list[Tensor]:
    """The tensors of an operation's result (a tensor, or nested lists/tuples of them), in order."""
    if isinstance(out, Tensor):
        return [out]
    found: list[Tensor] = []
    if isinstance(out, (list, tuple)):
        for o in out:
            if isinstance(o, Tensor):
                found.append(o)
            elif isinstance(o, (list, tuple)):
                found += flat_tensors(o)
    return found


def slice_tensors(s: slice) -> list[Tensor]:
    """The tensors a slice holds as its bounds or step (``x[: n + 1]`` with ``n`` a tensor)."""
    return [b for b in (s.start, s.stop, s.step) if isinstance(b, Tensor)]


def shape_index_tensors(args: tuple[Any, ...]) -> list[Tensor]:
    """The tensors of ``x[index]`` that decide the result's shape: boolean masks, slice bounds."""
    idx = args[1] if len(args) > 1 else None
    out: list[Tensor] = []
    for i in idx if isinstance(idx, tuple) else (idx,):
        if isinstance(i, Tensor) and i.dtype == torch.bool:
            out.append(i)
        elif isinstance(i, slice):
            out += slice_tensors(i)
    return out


def running_statistics(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None
) -> tuple[Tensor, ...]:
    """The running-statistics buffers that a normalization call updates in place: ``batch_norm``
    in training, ``instance_norm`` from its input's statistics with running buffers given. torch
    writes them inside its kernel, where no in-place op is seen. Likewise the table of
    ``F.embedding`` / ``F.embedding_bag`` with ``max_norm``: the rows the indices select are
    renormalized in place (``embedding_renorm_``, run inside the call the tracker sees)."""
    functional = torch.nn.functional
    kw = kwargs or {}

    def arg(i: int, key: str, default: Any = None) -> Any:
        return kw.get(key, args[i] if len(args) > i else default)

    if func is functional.embedding or func is functional.embedding_bag:
        table = arg(1, "weight")
        return (table,) if arg(3, "max_norm") is not None and isinstance(table, Tensor) else ()
    if func is functional.batch_norm or func is functional.instance_norm:
        buffers = (arg(1, "running_mean"), arg(2, "running_var"))
    elif func is torch.batch_norm or func is torch.instance_norm:
        buffers = (arg(3, "running_mean"), arg(4, "running_var"))
    else:
        return ()
    if func is functional.batch_norm or func is torch.batch_norm:
        updates = bool(arg(5, "training", False))
    else:
        updates = bool(arg(5, "use_input_stats", True))
    return tuple(b for b in buffers if isinstance(b, Tensor)) if updates else ()
