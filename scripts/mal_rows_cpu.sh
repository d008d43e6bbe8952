#!/usr/bin/env bash
# MAL (Li et al.): Table 1 rows trained one after the other on one CPU thread, each for a number of
# steps (MAL_STEPS; or, as a user option, a wall-clock budget MAL_BUDGET_S), then evaluated on the test split (beam 10, trigram blocking, `<unk>` forbidden,
# Table 4 with --saliency-topk 10). The sizes of docs/results.md section 7: embeddings and GRUs of
# 64, batch 32, Adadelta (the paper's optimizer and its defaults).
#
#   MAL_CORPUS=scitldr MAL_DATA=runs/scitldr MAL_STEPS=1837 MAL_ROWS=MAL bash scripts/mal_rows_cpu.sh
#   MAL_CORPUS=debian MAL_DATA=runs/debian MAL_STEPS=4874 MAL_ROWS=MAL+SUATT bash scripts/mal_rows_cpu.sh
#
# Environment: MAL_CORPUS (scitldr | debian: target length and decoding limits), MAL_DATA (a prepared
# directory: the prepare commands are in docs/results.md section 7), MAL_ROWS (configurations),
# MAL_SEED, MAL_STEPS (training steps per row: the budget of documented results, the same on any
# machine), MAL_BUDGET_S (instead: training seconds per row; the result then depends on the
# machine's load, and the run's training.json and results say so), MAL_EXTRA (more --set options, e.g. a
# temperature), MAL_TAG (a suffix for the run directories), MAL_OUT (parent of the run
# directories, default runs/mal_cpu). Each run writes RUN/train.log, RUN/test.json and
# RUN/test.summaries.jsonl; compare two with `scg-summarize compare A/test.summaries.jsonl
# B/test.summaries.jsonl`.
set -u
cd "$(dirname "$0")/.."
CORPUS=${MAL_CORPUS:-scitldr}
DATA=${MAL_DATA:-runs/$CORPUS}
ROWS=${MAL_ROWS:-MAL-SEQ2SEQ MAL+SUATT MAL+UNATT MAL}
SEED=${MAL_SEED:-1}
STEPS_IN_ALL=${MAL_STEPS:-}
BUDGET=${MAL_BUDGET_S:-}
if [ -n "$STEPS_IN_ALL" ]; then
    LIMIT_SET="--set train.max_steps=$STEPS_IN_ALL"; LIMIT_SAY="$STEPS_IN_ALL steps"
elif [ -n "$BUDGET" ]; then
    LIMIT_SET="--set train.time_budget_s=$BUDGET"; LIMIT_SAY="$BUDGET s (a wall-clock budget: load-dependent)"
else
    echo "mal_rows_cpu.sh: give MAL_STEPS (steps per row) or MAL_BUDGET_S (seconds per row)" >&2; exit 2
fi
EXTRA=${MAL_EXTRA:-}
TAG=${MAL_TAG:-}
OUT=${MAL_OUT:-runs/mal_cpu}
case "$CORPUS" in
    scitldr) TGT=40; STEPS=250; DEC="--max-len 30 --min-len 10"; LIMIT=618 ;;
    debian) TGT=30; STEPS=500; DEC="--max-len 20 --min-len 2"; LIMIT=600 ;;
    *) echo "mal_rows_cpu.sh: MAL_CORPUS must be scitldr or debian, got '$CORPUS'" >&2; exit 2 ;;
esac
if [ ! -f "$DATA/meta.json" ]; then
    echo "mal_rows_cpu.sh: $DATA/meta.json not found: prepare the corpus first (docs/results.md, section 7)" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
S="--set model.emb_dim=64 --set model.hidden=64 --set train.batch_size=32 --set train.threads=1"
for c in $ROWS; do
    run="$OUT/$CORPUS-$c-s$SEED$TAG"
    mkdir -p "$run"
    echo "== $run: training for $LIMIT_SAY (load $(cut -d' ' -f1-3 /proc/loadavg))"
    # shellcheck disable=SC2086
    /usr/bin/time -f "train wall %e s, cpu %U+%S s" scg-summarize train --config "$c" --data "$DATA" \
        --out "$run" --no-test --quiet $S --set train.seed="$SEED" --set data.max_target_len=$TGT \
        --set train.epochs=100000 --set train.max_steps_per_epoch=$STEPS \
        $LIMIT_SET $EXTRA >"$run/train.log" 2>&1 || { tail "$run/train.log"; exit 1; }
    tail -1 "$run/train.log"
    # shellcheck disable=SC2086
    /usr/bin/time -f "eval wall %e s, cpu %U+%S s" scg-summarize evaluate --run "$run" --split test \
        --beam 10 $DEC --no-repeat-ngram 3 --unk forbid --limit $LIMIT --threads 1 --saliency-topk 10 \
        --output "$run/test.json" >"$run/eval.log" 2>&1 || { tail "$run/eval.log"; exit 1; }
    tail -1 "$run/eval.log"
done
