#!/usr/bin/env bash
# The four Table 1 rows of MAL (Li et al.) on debian-descriptions, trained at once on one GPU, each for a
# fixed wall-clock budget (the sizes of docs/results.md section 7: embeddings and GRUs of 64, batch 32).
#
#   D=../shared/data/debian-descriptions; head -500 $D/valid.jsonl > .gpu/debian-valid500.jsonl
#   scg-summarize prepare --format jsonl --source-field document --target-field summary --skip-bad \
#       --input train=$D/train.jsonl --input valid=.gpu/debian-valid500.jsonl --input test=$D/test.jsonl \
#       --chunks 1 --chunk-len 100 --vocab-size 30000 --max-target-len 30 --output .gpu/mal-debian
#   bash scripts/mal_rows_gpu.sh          # on the GPU machine (device call: carry .gpu/mal-debian and .whl)
#
# Brings back each run's best.pt with float16 weights ($OUT/<config>.best.pt, ~12 MB each) and the
# training logs ($OUT/mal_gpu.tgz); `python scripts/mal_rows_gpu.sh`'s companion step on the CPU is
#   python -c "import torch,sys; s=torch.load(sys.argv[1], map_location='cpu'); \
#     s['model']={k: v.float() if v.is_floating_point() else v for k, v in s['model'].items()}; \
#     torch.save(s, sys.argv[2])" OUT/MAL.best.pt runs/mal_gpu/MAL/best.pt
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/mal_gpu}
DATA=${MAL_DATA:-.gpu/mal-debian}
BUDGET=${MAL_BUDGET_S:-150}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$PWD:$PWD/examples/summarization${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
mkdir -p runs/mal_gpu "$OUT"
S="--set model.emb_dim=64 --set model.hidden=64 --set train.batch_size=32 --set train.threads=1 --set train.seed=1"
for c in MAL-SEQ2SEQ MAL+SUATT MAL+UNATT MAL; do
    timeout --kill-after=15 $((BUDGET + 90)) $PY -m scg_summarize.cli train --config "$c" --data "$DATA" \
        --out "runs/mal_gpu/$c" --no-test $S --set data.max_target_len=30 --set train.device=cuda \
        --set train.epochs=1000 --set train.max_steps_per_epoch=400 --set train.time_budget_s="$BUDGET" \
        --quiet >"runs/mal_gpu/$c.log" 2>&1 &
done
wait
$PY - <<'EOF'
import os, pathlib, torch
out = pathlib.Path(os.environ.get("OUT", "runs/mal_gpu"))
for run in sorted(pathlib.Path("runs/mal_gpu").iterdir()):
    best = run / "best.pt"
    if best.is_file():
        state = torch.load(best, map_location="cpu", weights_only=False)
        state["model"] = {k: v.half() if v.is_floating_point() else v for k, v in state["model"].items()}
        torch.save(state, out / f"{run.name.replace('+', '_')}.best.pt")  # the device tool returns [A-Za-z0-9._-] names only
        print(run.name, "step", state.get("step"))
EOF
tar czf "$OUT/mal_gpu.tgz" runs/mal_gpu/*.log runs/mal_gpu/*/*.json* 2>/dev/null
ls -la "$OUT"
