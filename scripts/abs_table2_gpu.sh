#!/usr/bin/env bash
# Table 2 of Rush et al. (2015) at the paper's sizes on a GPU: the four neural rows (NNLM, bag-of-words,
# convolutional, attention-based) trained with the paper's recipe (SGD, lr 0.05 halved when the validation
# log-likelihood does not improve, batches of 64 grouped by input length, max-norm renormalisation after
# each epoch, D = 200, H = 400, C = 5, 15 epochs) and with Adam (lr 0.002, ours), all eight runs at once on
# one GPU (each is launch-bound). The KN 5-gram row needs no GPU (docs/results.md section 6).
#
#   D=../shared/data/debian-descriptions
#   scg-summarize prepare --format jsonl --source-field document --target-field summary \
#       --input train=$D/train.jsonl --input valid=$D/valid.jsonl --input test=$D/test.jsonl \
#       --chunks 1 --chunk-len 50 --vocab-size 10000 --max-target-len 20 --skip-bad --output .gpu/abs-debian
#   bash scripts/abs_table2_gpu.sh            # on the GPU machine (device call: carry .gpu and .whl)
#   ABS_OPTS=sgd ABS_EPOCHS=60 ABS_LIMIT_S=400 ABS_KEEP=0 bash scripts/abs_table2_gpu.sh   # SGD, longer
#
# Each run is `scg-summarize train --config ABS` (the trainer of every family; configs/ABS.toml is the
# paper's recipe) in runs/abs_gpu/<optimizer>_<encoder>/ (metrics.jsonl: a `valid` line per epoch with the
# validation perplexity), packs the logs into $OUT/abs_gpu.tgz, and the weights of the attention-based model
# of the better optimizer as float16 in 15 MB parts ($OUT/abs_attention.pt.part-*; `cat` them together).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/abs_gpu}
DATA=${ABS_DATA:-.gpu/abs-debian}
LIMIT=${ABS_LIMIT_S:-420}        # seconds per run (each run logs every epoch, so a cut run keeps its curve)
OPTS=${ABS_OPTS:-sgd adam}        # optimizers to run
EPOCHS=${ABS_EPOCHS:-15}
KEEP=${ABS_KEEP:-1}               # 1: bring back the attention model's weights
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$PWD:$PWD/examples/summarization${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
mkdir -p runs/abs_gpu "$OUT"
for opt in $OPTS; do
    lr=0.05
    [ "$opt" = adam ] && lr=0.002
    for enc in none bow conv attention; do
        timeout --kill-after=10 "$LIMIT" $PY -m scg_summarize.cli train --config ABS --data "$DATA" \
            --out "runs/abs_gpu/${opt}_${enc}" --overwrite --no-test --quiet --set model.abs_encoder="$enc" \
            --set train.optimizer="$opt" --set train.lr="$lr" --set train.epochs="$EPOCHS" --set train.device=cuda \
            >"runs/abs_gpu/${opt}_${enc}.log" 2>&1 &
    done
done
wait
for f in runs/abs_gpu/*/metrics.jsonl; do echo "$f: $(grep '"valid"' "$f" | tail -n 1)"; done
[ "$KEEP" = 1 ] && $PY - <<'EOF'
import json, pathlib, torch
best = None
for opt in ("sgd", "adam"):
    run = pathlib.Path(f"runs/abs_gpu/{opt}_attention")
    log = run / "metrics.jsonl"
    if (run / "best.pt").is_file() and log.is_file():
        ppl = min(r["ppl"] for r in map(json.loads, log.read_text().splitlines()) if r["event"] == "valid")
        if best is None or ppl < best[0]:
            best = (ppl, run)
if best is not None:
    model = torch.load(best[1] / "best.pt", map_location="cpu", weights_only=False)["model"]
    state = {k: v.half() if v.is_floating_point() else v for k, v in model.items()}
    torch.save({"run": str(best[1]), "valid_ppl": best[0], "state": state}, "runs/abs_gpu/abs_attention.pt")
    print("kept", best)
EOF
[ -f runs/abs_gpu/abs_attention.pt ] && split -b 15M runs/abs_gpu/abs_attention.pt "$OUT/abs_attention.pt.part-"
tar czf "$OUT/abs_gpu.tgz" runs/abs_gpu/*.log runs/abs_gpu/*/metrics.jsonl runs/abs_gpu/*/config.json 2>/dev/null
ls -la "$OUT"
