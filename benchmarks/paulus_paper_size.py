"""The paper-size Paulus et al. (2018) model on long articles: one training step and beam search.

Builds ``PAULUS-ML`` at the paper's sizes (BiLSTM 2 × 200, decoder 400, 100-d embeddings, input ≤ 800
words, output ≤ 100, V_t = min(50k, V)) on a prepared corpus (``cnndm-250``: 250 CNN/DailyMail test
articles, prepared with ``--chunks 1 --chunk-len 800``) and measures, on one device:

* ``train_step``: forward + backward of the ML objective (teacher forcing, fed samples with p = 0.25)
  on a batch of ``--batch`` articles (the paper's 50), seconds per step and per target word; the same
  for the model *without* its intra-attentions (``intra_temporal = intra_decoder = false``), the
  reference the ratio is taken against (what the intra-attentions cost);
* ``beam``: beam search (beam 5, trigram blocking, ≤ 100 words) of ``--beam-examples`` articles,
  seconds per article;
* peak memory: the process's peak resident set (CPU) or ``max_memory_allocated`` (CUDA).

Untrained weights: this measures cost, not quality.

    python benchmarks/paulus_paper_size.py --data runs/cnndm250 --batch 50 --beam-examples 4

Writes ``benchmarks/results/paulus_paper_size_<device>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from pathlib import Path
from typing import Any

import torch
from scg_summarize.data.batching import Batch
from scg_summarize.decode_options import DecodeOptions
from scg_summarize.decoding.adapters import ModelStepDecoder
from scg_summarize.decoding.beam import beam_search
from scg_summarize.train.config_loading import load_config
from scg_summarize.train.data import batch_to, load_dataset, make_loader
from scg_summarize.train.model_init import build_model


def _peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _train_step(config: Any, dataset: Any, batch: Batch, device: torch.device) -> dict[str, float]:
    torch.manual_seed(0)
    model = build_model(config, len(dataset.vocab), dataset.num_chunks).to(device).train()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start, cpu = time.perf_counter(), time.process_time()
    out = model(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask)
    (out.total_nll() / batch.src.shape[0]).backward()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "target_words": int(out.tokens()),
        "ms_per_target_word": 1000 * seconds / int(out.tokens()),
        "decoder_steps": len(out.step_nll),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a prepared corpus (cnndm-250, --chunks 1 --chunk-len 800)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--beam-examples", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = load_config("PAULUS-ML", ["data.regrid=[1, 800]"])
    dataset = load_dataset(args.data, args.split, config, train=True)
    loader = make_loader(dataset, config, train=False, batch_size=args.batch)
    batch = batch_to(next(iter(loader)), device, config)
    lengths = batch.src_mask.sum((1, 2)).float()
    result: dict[str, Any] = {
        "device": str(device),
        "threads": args.threads,
        "torch": torch.__version__,
        "machine": platform.processor(),
        "batch": args.batch,
        "source_words_mean": float(lengths.mean()),
        "source_words_max": int(lengths.max()),
        "vocab": len(dataset.vocab),
        "target_vocab": min(config.model.tgt_vocab_size, len(dataset.vocab)),
    }
    result["train_step"] = _train_step(config, dataset, batch, device)
    result["peak_mb_after_train_step"] = _peak_mb(device)
    plain = load_config(
        "PAULUS-ML", ["data.regrid=[1, 800]", "model.intra_temporal=false", "model.intra_decoder=false"]
    )
    result["train_step_without_intra_attention"] = _train_step(plain, dataset, batch, device)
    key = "cpu_seconds" if device.type == "cpu" else "seconds"  # CPU time: robust to a shared machine
    result["intra_attention_cost_ratio"] = result["train_step"][key] / result["train_step_without_intra_attention"][key]
    torch.manual_seed(0)
    model = build_model(config, len(dataset.vocab), dataset.num_chunks).to(device).eval()
    decode = config.eval.decode
    options = DecodeOptions(beam_size=decode.beam_size, max_len=decode.max_len, no_repeat_ngram=decode.no_repeat_ngram)
    small = batch.rows(slice(args.beam_examples))
    start, cpu = time.perf_counter(), time.process_time()
    found = beam_search(ModelStepDecoder(model), small, options)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    result["beam"] = {
        "examples": len(found),
        "seconds_per_article": seconds / len(found),
        "cpu_seconds_per_article": cpu / len(found),
        "mean_length": sum(len(h[0]) for h in found) / len(found),
        "beam": options.beam_size,
        "block_ngram": options.no_repeat_ngram,
        "max_len": options.max_len,
    }
    result["peak_mb"] = _peak_mb(device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"paulus_paper_size_{device.type}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    memory_kind = "max_memory_allocated" if device.type == "cuda" else "peak RSS"
    ts, ref, beam = result["train_step"], result["train_step_without_intra_attention"], result["beam"]
    lines = [
        "# Paulus et al. (2018) at paper size on cnndm-250 (untrained weights: cost only)",
        "",
        f"device {result['device']} ({args.threads} thread(s)), torch {result['torch']}; batch {args.batch} "
        f"articles, {result['source_words_mean']:.0f} source words on average (max {result['source_words_max']}); "
        f"V = {result['vocab']}, V_t = {result['target_vocab']}; {ts['parameters']:,} parameters",
        "",
        "| measurement | wall | CPU |",
        "|---|---|---|",
        f"| training step (forward + backward, {ts['decoder_steps']} decoder steps, {ts['target_words']} target "
        f"words) | {ts['seconds']:.1f} s | {ts['cpu_seconds']:.1f} s |",
        f"| the same without intra-attentions (reference; CPU ratio {result['intra_attention_cost_ratio']:.2f}) | "
        f"{ref['seconds']:.1f} s | {ref['cpu_seconds']:.1f} s |",
        f"| beam search per article (beam {beam['beam']}, trigram blocking, ≤ {beam['max_len']} words; mean "
        f"length {beam['mean_length']:.0f}) | {beam['seconds_per_article']:.1f} s | "
        f"{beam['cpu_seconds_per_article']:.1f} s |",
        "",
        f"Peak memory: {result['peak_mb_after_train_step']:.0f} MB after the training step, "
        f"{result['peak_mb']:.0f} MB for the whole run ({memory_kind}).",
        "",
    ]
    stem.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
