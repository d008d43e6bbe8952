"""Per-step kernels of the coarse-to-fine summarizer: coarse sampling, fine attention, beam top-k.

The model's C2F attention calls these ops once per decoder step (``models.attention.c2f_step`` /
``c2f_kernel_step``: :func:`fused_c2f_read`, and on the Triton backend :func:`c2f_coarse_sample` with
:class:`KernelDraws`; :func:`c2f_attention` is the same step as one call for other users), and beam search
calls :func:`logsoftmax_topk` once per step (``decoding.adapters.ModelStepDecoder.step_topk``); the same
call runs Triton kernels on CUDA tensors and the PyTorch reference on CPU tensors
(``SCG_KERNELS=auto|triton|reference`` forces one; see :mod:`.backend` and ``docs/kernels.md``). Modules:

* :mod:`.reference` -- the PyTorch reference (CPU path and test oracle); :mod:`.philox` -- Triton's
  Philox generator in torch, so both backends draw the same samples for a seed.
* :mod:`.ops` -- the C2F attention's ``torch.library`` custom ops, in the example's own namespace
  (``scg_summarize::c2f_coarse_sample``, ``scg_summarize::c2f_fine_attend``,
  ``scg_summarize::c2f_attend``, ``scg_summarize::c2f_fine_backward``) with fake kernels and
  autograd; :mod:`.topk_op` -- beam search's (``scg_summarize::logsoftmax_topk``); :mod:`.op_guards`
  -- the argument checks every op makes before its kernel, and autocast off inside it.
* :mod:`.step` -- the per-step API (and :class:`KernelDraws`, which makes the kernel's draws an scg
  node); :mod:`.backend` -- backend choice; :mod:`.word_grads` -- the fine reads' gradients of the
  word states collected in one buffer per backward pass (:func:`collect_word_grads`).
* ``triton_coarse``, ``triton_fine``, ``triton_topk``, ``triton_common`` -- the Triton kernels,
  imported only when a Triton backend runs; :mod:`.compile_check` -- sm_90 compilation without a GPU.
"""

from .backend import ENV_VAR, choose, forced, triton_available
from .ops import c2f_attend, c2f_coarse_sample, c2f_fine_attend, c2f_fine_backward
from .step import FusedC2FStep, KernelDraws, c2f_attention, draw_log_prob, fused_c2f_read
from .topk_op import logsoftmax_topk
from .word_grads import collect_word_grads

__all__ = [
    "ENV_VAR",
    "FusedC2FStep",
    "KernelDraws",
    "c2f_attend",
    "c2f_attention",
    "c2f_coarse_sample",
    "c2f_fine_attend",
    "c2f_fine_backward",
    "choose",
    "collect_word_grads",
    "draw_log_prob",
    "forced",
    "fused_c2f_read",
    "logsoftmax_topk",
    "triton_available",
]
