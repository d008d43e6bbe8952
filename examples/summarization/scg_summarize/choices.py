"""The closed sets of names that the command line offers as choices.

They live here, in a module that imports nothing, so that the parsers of ``scg-summarize`` (and
``--help``, and an argument error) need no torch, numpy or matplotlib. Each set is the one source
for the module that uses it: `data.readers` reads the `CORPUS_FORMATS`, `data.options` checks the
`LAYOUTS`, `decoding.inputs` reads the `INPUT_FORMATS`, `viz.output` writes the `FIGURE_FORMATS`,
`evaluation.rouge` reports the `ROUGE_SCORES` and `evaluation.baselines` implements the `BASELINES`.
"""

from __future__ import annotations

__all__ = ["BASELINES", "CORPUS_FORMATS", "FIGURE_FORMATS", "INPUT_FORMATS", "LAYOUTS", "ROUGE_SCORES"]

#: The corpus formats ``scg-summarize prepare --format`` reads (besides ``synthetic``).
CORPUS_FORMATS: tuple[str, ...] = ("cnndm", "jsonl", "parallel")

#: The chunk layouts of a prepared corpus (``prepare --layout``).
LAYOUTS: tuple[str, ...] = ("grid", "sentences")

#: The document formats ``scg-summarize summarize --input-format`` reads (besides ``document``).
INPUT_FORMATS: tuple[str, ...] = ("text", "jsonl")

#: The figure formats ``scg-summarize visualize`` writes.
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")

#: The ROUGE scores a result reports, in table order.
ROUGE_SCORES: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")

#: The extractive baseline methods, in table order.
BASELINES: tuple[str, ...] = ("first", "lead3", "prefix", "textrank")
