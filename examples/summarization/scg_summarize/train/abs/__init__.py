"""ABS's own training loop and the command-line runs around it (Rush, Chopra & Weston 2015).

==================== =====================================================================
``loop``             NLL training with the paper's schedule (SGD, halving, max-norm); a CLI
``count_baselines``  KN 5-gram perplexity, IR baseline, Ext. % on a prepared corpus (CLI)
``variants``         a trained run decoded as ABS / recombined / greedy / extractive / ABS+
==================== =====================================================================

The model itself is in :mod:`scg_summarize.models.abs`; see ``docs/abs.md``. Registering ABS in
the model-family registry (so that ``scg-summarize train`` knows it) is left for later.
"""
