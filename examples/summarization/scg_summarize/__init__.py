"""Coarse-to-fine hard-attention summarization (Ling & Rush, 2017) built on ``scg``.

Subpackages:

* :mod:`scg_summarize.data` -- readers, preprocessing, prepared storage, datasets and the
  synthetic corpus.
* :mod:`scg_summarize.cli` -- the ``scg-summarize`` command line.
"""

__version__ = "0.1.0"
