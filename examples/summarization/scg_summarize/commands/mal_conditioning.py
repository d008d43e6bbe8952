"""The ``scg-summarize mal-conditioning`` subcommand: how often MAL's literal closed-form PageRank is
singular or ill-conditioned on real text, with each edge-weight guard
([`measure_conditioning`][scg_summarize.models.mal.conditioning.measure_conditioning]; ``docs/mal.md``).

    scg-summarize mal-conditioning --data DIR --split valid --docs 1000 --emb-dim 64
    scg-summarize mal-conditioning --data DIR --split valid --docs 1000 --run RUN_DIR --out result.json

Prints (and with ``--out``, writes) one JSON object.
"""

from __future__ import annotations

import argparse
import json

from . import Command
from ._common import USER_ERRORS, add_overwrite_argument, error, positive_int, refuse_existing, write_json

__all__ = ["COMMAND"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mal-conditioning``."""
    parser.add_argument("--data", required=True, metavar="DIR", help="a prepared corpus")
    parser.add_argument("--split", default="valid", help="the split measured (default valid)")
    parser.add_argument("--docs", type=positive_int, default=500, help="documents measured (default 500)")
    parser.add_argument("--run", default=None, help="a MAL run directory (default: a fresh initialization)")
    parser.add_argument("--seed", type=int, default=0, help="the initialization seed (default 0)")
    parser.add_argument("--emb-dim", type=positive_int, default=64, help="embedding size of a fresh model (default 64)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    add_overwrite_argument(parser, "--out")


def run(args: argparse.Namespace) -> int:
    """Execute ``mal-conditioning``; returns 0, or 2 on bad input."""
    import torch

    from ..data import SummarizationDataset
    from ..models.loading import load_model, run_checkpoint
    from ..models.mal.conditioning import measure_conditioning
    from ..models.mal.config import MALConfig
    from ..models.mal.model import MALSummarizer

    try:
        refuse_existing("--out", [args.out], args.overwrite)
        dataset = SummarizationDataset(args.data, args.split, with_text=False)
        torch.manual_seed(args.seed)
        model: MALSummarizer
        if args.run:
            weights = run_checkpoint(args.run)
            loaded, _ = load_model(weights)
            if not isinstance(loaded, MALSummarizer):
                raise ValueError(f"{weights}: not a MAL model (model.family = {loaded.config.family!r})")
            model = loaded.eval()
        else:
            model = MALSummarizer.for_vocab(MALConfig(emb_dim=args.emb_dim), dataset.vocab)
        result = measure_conditioning(model, dataset, args.docs)
        result.update(data=str(args.data), split=args.split, run=args.run, seed=args.seed)
        text = write_json(result, args.out) if args.out else json.dumps(result, indent=2)
    except USER_ERRORS as err:
        return error("mal-conditioning", err)
    print(text)
    return 0


COMMAND = Command(
    name="mal-conditioning",
    help="how often MAL's closed-form PageRank is ill-conditioned on a corpus, with each edge-weight guard",
    add_arguments=add_arguments,
    run=run,
)
