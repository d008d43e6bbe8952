"""The ``scg-summarize evaluate`` subcommand: perplexity, ROUGE and attention metrics of a run.

Example::

    scg-summarize evaluate --run runs/c2f --data data/cnndm --split test --beam 5 --no-repeat-ngram 3

``--data`` defaults to the corpus the run was trained on. The search settings default to the
run's ``[eval]`` table, else to the documented settings (beam 4, 10-40 words, trigram blocking,
``<unk>`` replaced); the settings used are printed. The result is written to
``RUN_DIR/eval/<data>-<split>.<settings>.json`` (or ``--output``; see
:mod:`scg_summarize.evaluation.naming`: evaluating again with other options writes another file,
and a file holding a result with other settings is never replaced without ``--overwrite``), the
per-example summaries and scores next to it (``.summaries.jsonl``), and a markdown table in the
layout of the paper's Table 1 is printed. A corpus prepared differently from the run's training
data (another chunk layout, tokenizer, casing...) is evaluated with a warning, also stored in the
result. ``scg-summarize report`` collects the result files into one table.

``--saliency-topk K`` adds Li et al.'s Table 4 analysis for a model that scores its source words
(MAL): ROUGE-1 F1 of the top-K distinct source words by each saliency attention (a^s: ``SuAtt``,
a^u: ``UnAtt``; ``Lead``, the first K content words, as a reference point) against the
references, on the same examples, stored under ``"saliency_topk"`` in the result file
(:mod:`scg_summarize.evaluation.saliency_topk`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import Command
from ._common import (
    CORPUS_DIR,
    RUN_DIR,
    USER_ERRORS,
    add_rouge_arguments,
    error,
    positive_int,
    refuse_existing,
    require_dirs,
    rouge_options,
    set_threads,
    write_jsonl,
)

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``evaluate``."""
    from ._decoding_args import add_decode_arguments

    parser.add_argument("--run", required=True, type=Path, metavar="RUN_DIR", help="a trained run directory")
    parser.add_argument("--data", type=Path, default=None, metavar="DIR", help="prepared corpus (default: the run's)")
    parser.add_argument("--split", default="test", help="split to evaluate (default test)")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help="evaluate only the first N examples of the split, in its stored order (not a sample)",
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="result JSON (default RUN_DIR/eval/DATA-SPLIT.SETTINGS.json)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing result file even when its settings differ"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--saliency-topk",
        type=positive_int,
        default=None,
        metavar="K",
        help="also score the top-K source words of each saliency attention with ROUGE-1 "
        "(Li et al.'s Table 4, k = 10; MAL runs)",
    )
    add_decode_arguments(parser, skip=("extras",))  # (it records the attention its metrics read, and writes no extras)
    add_rouge_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Execute ``evaluate``; returns 0 on success, 1 on an error."""
    from ..data.dataset import SummarizationDataset
    from ..data.progress import Progress, progress_enabled
    from ..decode_options import describe_options
    from ..decoding.loading import input_mismatch, load_run
    from ..evaluation.naming import check_result_path, decode_tag, model_stem, write_result_safely
    from ..evaluation.report import markdown_report
    from ..evaluation.runner import evaluate_model, model_result
    from ..evaluation.saliency_topk import run_saliency_top_k, saliency_model
    from ._decoding_args import check_recombine, decode_options, describe_sources, given_options

    set_threads(args)
    try:
        require_dirs(args, {"--run": RUN_DIR, "--data": CORPUS_DIR})
        loaded = load_run(
            args.run, checkpoint=args.checkpoint, coarse_topk=args.coarse_topk, device=args.device, data_dir=args.data
        )
        if args.saliency_topk is not None:
            saliency_model(loaded)  # before decoding a whole split: does the model score its source words?
        data_dir = args.data or loaded.data_dir
        if data_dir is None:
            raise ValueError(f"{args.run}: the run does not record its data directory; pass --data DIR")
        dataset = SummarizationDataset(data_dir, args.split)
        warnings = [
            f"{data_dir} was prepared with {m}"
            for m in input_mismatch(loaded.prep_options, dataset.options, regrid=loaded.regrid is not None)
        ]
        for line in warnings:
            print(f"evaluate: warning: {line}: the model does not read what it was trained on", file=sys.stderr)
        run_options = loaded.run_options
        decode = decode_options(args, run_options)
        check_recombine(decode, loaded.decoder, args.run)
        sources = describe_sources(decode, given_options(args), run_options)
        print(f"evaluate: decoding with {describe_options(decode)} ({sources})", file=sys.stderr)
        rouge = rouge_options(args, digits_mapped=loaded.prep_options.digits_to_hash)
        tag = decode_tag(decode, coarse_topk=args.coarse_topk, limit=args.limit, checkpoint=args.checkpoint)
        stem = model_stem(Path(data_dir).name, args.split, tag, rouge)
        output = args.output or Path(args.run) / "eval" / f"{stem}.json"
        total = len(dataset) if args.limit is None else min(args.limit, len(dataset))
        # a file of other settings at --output is refused now, not after decoding the whole split
        check_result_path(
            model_result(loaded, dataset, decode, rouge, {}, examples=total), output, overwrite=args.overwrite
        )
        summaries = output.with_suffix(".summaries.jsonl")
        # (beside a result of these settings: that result's own summaries, rewritten with it)
        refuse_existing("--output", [summaries], args.overwrite or output.is_file())
        with Progress(f"evaluate {args.split}", total, enabled=progress_enabled(args.quiet)) as bar:
            result, outputs = evaluate_model(
                loaded,
                dataset,
                decode,
                rouge,
                limit=args.limit,
                batch_size=args.batch_size,
                device=args.device,
                progress=bar.update,
            )
        if args.saliency_topk is not None:
            result["saliency_topk"] = run_saliency_top_k(
                loaded, dataset, args.saliency_topk, limit=args.limit, batch_size=args.batch_size, device=args.device
            )
            scores = ", ".join(f"{name} {value:.2f}" for name, value in result["saliency_topk"]["rouge1"].items())
            print(f"evaluate: top-{args.saliency_topk} saliency words, ROUGE-1 F1: {scores}", file=sys.stderr)
        if warnings:
            result["warnings"] = warnings
        write_result_safely(result, output, overwrite=args.overwrite)
        write_jsonl(outputs, summaries)
    except USER_ERRORS as err:
        return error("evaluate", err)
    print(markdown_report([result], title=f"{loaded.model} on {Path(data_dir).name}/{args.split}"))
    print(f"evaluate: wrote {output}", file=sys.stderr)
    return 0


COMMAND = Command(
    name="evaluate",
    help="perplexity, ROUGE and coarse-attention metrics of a trained run on a prepared split",
    add_arguments=add_arguments,
    run=run,
)
