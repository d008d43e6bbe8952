"""Coarse-to-fine hard-attention summarization (Ling & Rush, 2017) built on ``scg``.

Subpackages, in layer order -- a module imports only from its own subpackage and from the
layers before it (``tests/summarization/test_layers.py`` checks every import):

* [`scg_summarize.data`][scg_summarize.data] -- readers, preprocessing, prepared storage, datasets and the
  synthetic corpus.
* [`scg_summarize.kernels`][scg_summarize.kernels] -- Triton kernels of the C2F step and their PyTorch reference.
* [`scg_summarize.models`][scg_summarize.models] -- the encoders, attentions, decoder and summarizer; loading a
  checkpoint.
* [`scg_summarize.decoding`][scg_summarize.decoding] -- beam and greedy search over the step protocol; loading runs.
* [`scg_summarize.evaluation`][scg_summarize.evaluation] -- ROUGE, perplexity, attention metrics, baselines, results.
* [`scg_summarize.viz`][scg_summarize.viz] -- figures.
* [`scg_summarize.train`][scg_summarize.train] -- configurations, the training loop, checkpoints, DDP.
* [`scg_summarize.demo`][scg_summarize.demo], [`scg_summarize.commands`][scg_summarize.commands],
  [`scg_summarize.cli`][scg_summarize.cli] -- the demo and the ``scg-summarize`` command line.

``jsonlines``, ``dirlock`` and ``devices`` are small helpers below all layers.
"""

__version__ = "0.1.0"
