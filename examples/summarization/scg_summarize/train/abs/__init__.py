"""ABS's flat (input, title) pairs for the count-based rows and the decoding variants of Rush,
Chopra & Weston (2015) (:mod:`.examples`).

ABS trains through the one trainer with its configuration (``scg-summarize train --config ABS``:
SGD 0.05 halved at the epochs that do not improve, batches by input length, max-norm
renormalization of the embeddings after each epoch); the model is in
:mod:`scg_summarize.models.abs`; see ``docs/abs.md``.
"""
