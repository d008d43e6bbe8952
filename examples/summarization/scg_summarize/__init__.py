"""Coarse-to-fine hard-attention summarization (Ling & Rush, 2017) built on ``scg``.

Subpackages, in layer order -- a module imports only from its own subpackage and from the
layers before it (``tests/summarization/test_layers.py`` checks every import):

* :mod:`scg_summarize.data` -- readers, preprocessing, prepared storage, datasets and the
  synthetic corpus.
* :mod:`scg_summarize.kernels` -- Triton kernels of the C2F step and their PyTorch reference.
* :mod:`scg_summarize.models` -- the encoders, attentions, decoder and summarizer; loading a
  checkpoint.
* :mod:`scg_summarize.decoding` -- beam and greedy search over the step protocol; loading runs.
* :mod:`scg_summarize.evaluation` -- ROUGE, perplexity, attention metrics, baselines, results.
* :mod:`scg_summarize.viz` -- figures.
* :mod:`scg_summarize.train` -- configurations, the training loop, checkpoints, DDP.
* :mod:`scg_summarize.demo`, :mod:`scg_summarize.commands`, :mod:`scg_summarize.cli` -- the demo
  and the ``scg-summarize`` command line.

``jsonlines`` and ``dirlock`` are small helpers below all layers.
"""

__version__ = "0.1.0"
