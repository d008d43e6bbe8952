#!/usr/bin/env bash
# Everything the GPU issues (17, 29) check and measure on a GPU, in one command, for a session with a lent GPU.
#
#   bash scripts/gpu_check.sh [PART ...]        # default: env c2f tests profile overhead train
#
# Parts (each has its own time limit, logs to $LOGS/<part>.log, and a failing part does not stop the rest):
#   env       nvidia-smi, torch / triton versions, the measured copy bandwidth
#   tests     the kernel tests on the real Triton backend (fp32 and bf16; tests/summarization/kernels/
#             test_kernels_{cuda,triton,model}.py, test_word_grads.py), the no-host-sync test of the scg
#             core (tests/scg/graph/test_core_sync.py) and train.cuda_graph's replays against eager steps
#             (tests/summarization/train/test_captured_cuda.py), junit XML in $LOGS
#   c2f       benchmarks/c2f_attention.py at B=64, N=40, H=512, M = 10, 100, 1000, k = 1, 2, bf16 and fp32
#   overhead  benchmarks/surrogate_overhead.py --device cuda at hidden 512 and 1024
#   train     benchmarks/train_throughput.py: STANDARD, HIER, C2F, C2F+MULTI2 at the paper's sizes on cnndm-250
#             prepared as 10 x 40 words (and STANDARD, C2F at 100 x 40), bf16 autocast
#   graph     the same STANDARD and C2F runs (M = 10, 100) with train.cuda_graph: each step's forward and
#             backward replayed from a CUDA graph (train_throughput.py --cuda-graph, results *_gpu_graph*)
#   curve     STANDARD and C2F with train.cuda_graph at M = 10, 100, 300, 1000 (x 40 words), bf16: ms per step
#             and peak memory against M (results *_gpu_curve*, with the plot)
#   memory    STANDARD and C2F at M = 300 (x 40 words), eager, bf16 and fp32: where one step's memory goes, by
#             source line (train_throughput.py --memory-by-line, benchmarks/step_memory.py; results *_gpu_memory*)
#             The training parts prepare the grids they lack in $GPU_DATA (cnndm250-<M>x40, 2 s each) from the
#             stories carried in $GPU_DATA/stories (`cp -r ../shared/data/cnndm-250/stories .gpu/`: 1.4 MB,
#             and `carry: [".gpu"]` in the device call), with the paper's vocabulary of 50004 entries: the
#             corpus's 14456 counted words followed by unused filler words (benchmarks/train_throughput.py)
#   profile   torch.profiler table of one C2F step at M = 100 and 1000 (where the time goes)
#   sweep     benchmarks/c2f_launch_sweep.py: the read's and the coarse blocks' (tile, warps, stages) at
#             M = 1000, k = 1, 2, bf16, back-to-back graph replays (about 32 compiles per part; not default)
#   ncu       the same with Nsight Compute's memory throughput of the kernels (when `ncu` is installed)
#
# Environment: OUT (where gpu_results.tgz and summary.txt go; the device tool sets it), LOGS (default
# runs/gpu_check: the per-part logs, junit XML and ncu CSV), GPU_DATA (default .gpu: the stories and
# the grids prepared from them, see grids below), WHEELS (default .whl:
# pure-Python wheels the GPU image lacks, installed to /tmp/site when the folder exists).
# The benchmark files (benchmarks/results/*_gpu*.{json,md,png}) are written in the checkout and packed
# with the logs into $OUT/gpu_results.tgz after every part (so a call stopped at its time limit still
# returns what the finished parts measured).
set -u
cd "$(dirname "$0")/.."
LOGS=${LOGS:-runs/gpu_check}
OUT=${OUT:-$LOGS}
GPU_DATA=${GPU_DATA:-.gpu}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT" "$LOGS"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$PWD:$PWD/examples/summarization${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$WHEELS"/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
PARTS=${*:-env c2f tests profile overhead train}
SUMMARY="$LOGS/summary.txt"

grids() {  # grids M...: $GPU_DATA/cnndm250-<M>x40 (40 words per chunk) with the paper's vocabulary, when absent
    local m n vocab="$GPU_DATA/paper_vocab.txt"
    if [ ! -f "$vocab" ]; then
        $PY -m scg_summarize.cli prepare --format cnndm --chunks 10 --chunk-len 40 --input train="$GPU_DATA/stories" \
            --output "$GPU_DATA/counted" --quiet >>"$LOGS/grids.log" 2>&1 || return
        n=$(wc -l <"$GPU_DATA/counted/vocab.txt")
        { cat "$GPU_DATA/counted/vocab.txt"; seq 0 $((50003 - n)) | awk '{printf "<unused-%d>\t0\n", $1}'; } >"$vocab"
    fi
    for m; do
        [ -d "$GPU_DATA/cnndm250-${m}x40" ] || $PY -m scg_summarize.cli prepare --format cnndm --chunks "$m" \
            --chunk-len 40 --vocab "$vocab" --input train="$GPU_DATA/stories" --output "$GPU_DATA/cnndm250-${m}x40" \
            --quiet >>"$LOGS/grids.log" 2>&1
    done
}

part() {  # part NAME LIMIT_S COMMAND...
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "== $name (limit ${limit}s): $*" | tee -a "$SUMMARY"
    timeout --kill-after=10 "$limit" "$@" >>"$LOGS/$name.log" 2>&1
    rc=$?
    echo "== $name rc=$rc $(($(date +%s) - start))s" | tee -a "$SUMMARY"
    tail -n 5 "$LOGS/$name.log"
    return $rc
}

for p in $PARTS; do
    case $p in
    env)
        part env 60 bash -c "nvidia-smi; $PY -c 'import torch, triton, numpy; print(torch.__version__, \
torch.version.cuda, triton.__version__, numpy.__version__, torch.cuda.get_device_name(), \
torch.cuda.get_device_properties(0))'; which ncu || true" ;;
    tests)
        part tests 200 $PY -m pytest -q -p no:cacheprovider -rfEs --junitxml="$LOGS/tests.xml" \
            tests/summarization/kernels/test_kernels_cuda.py tests/summarization/kernels/test_kernels_triton.py \
            tests/summarization/kernels/test_kernels_model.py tests/summarization/kernels/test_word_grads.py \
            tests/scg/graph/test_core_sync.py tests/summarization/train/test_captured_cuda.py
        $PY scripts/junit_to_results.py "$LOGS/tests.xml" kernel_tests_gpu --command "bash scripts/gpu_check.sh tests" \
            --device "$($PY -c 'import torch, triton; print(torch.cuda.get_device_name(), "(torch", torch.__version__ + ", triton", triton.__version__ + ")")')" ;;
    c2f)
        for dt in bf16 fp32; do
            part "c2f_$dt" 150 $PY benchmarks/c2f_attention.py --device cuda --dtype "$dt" \
                --chunks 10 100 1000 --ks 1 2 --repeats 20
        done ;;
    overhead)
        part overhead 150 $PY benchmarks/surrogate_overhead.py --device cuda --hidden 512 1024 --compile ;;
    train)
        grids 10 100
        part train 330 $PY benchmarks/train_throughput.py --data "$GPU_DATA/cnndm250-10x40" \
            --configs STANDARD HIER C2F C2F+MULTI2 --also "$GPU_DATA/cnndm250-100x40" STANDARD C2F \
            --steps 200 --warmup 10 --device cuda --amp bf16 --max-seconds 35 --budget-s 300 --tag gpu ;;
    graph)
        grids 10 100
        part graph 240 $PY benchmarks/train_throughput.py --data "$GPU_DATA/cnndm250-10x40" \
            --configs STANDARD C2F --also "$GPU_DATA/cnndm250-100x40" STANDARD C2F \
            --steps 200 --warmup 10 --device cuda --amp bf16 --max-seconds 25 --budget-s 220 --cuda-graph \
            --tag gpu_graph ;;
    curve)
        grids 10 100 300 1000
        part curve 360 $PY benchmarks/train_throughput.py --data "$GPU_DATA/cnndm250-10x40" --configs STANDARD C2F \
            --also "$GPU_DATA/cnndm250-100x40" STANDARD C2F --also "$GPU_DATA/cnndm250-300x40" STANDARD C2F \
            --also "$GPU_DATA/cnndm250-1000x40" STANDARD C2F --steps 60 --warmup 4 --device cuda --amp bf16 \
            --max-seconds 15 --budget-s 330 --cuda-graph --tag gpu_curve ||
            # (every run failed, as when a CUDA graph cannot be captured: the same curve eager, for its shape)
            part curve_eager 200 $PY benchmarks/train_throughput.py --data "$GPU_DATA/cnndm250-10x40" \
                --configs STANDARD C2F --also "$GPU_DATA/cnndm250-100x40" STANDARD C2F --also \
                "$GPU_DATA/cnndm250-1000x40" STANDARD C2F --steps 30 --warmup 3 --device cuda --amp bf16 \
                --max-seconds 10 --budget-s 180 --tag gpu_curve_eager ;;
    memory)
        grids 300
        part memory 150 $PY benchmarks/train_throughput.py --data "$GPU_DATA/cnndm250-300x40" --configs STANDARD C2F \
            --amp bf16 none --steps 3 --warmup 2 --device cuda --memory-by-line 8 --max-seconds 10 --budget-s 130 \
            --tag gpu_memory ;;
    profile)
        part profile 90 $PY benchmarks/c2f_profile.py --out "$LOGS" --no-ncu ;;
    sweep)
        part sweep 240 $PY benchmarks/c2f_launch_sweep.py --dtype bf16 ;;
    ncu)
        part ncu 150 $PY benchmarks/c2f_profile.py --out "$LOGS" ;;
    *) echo "unknown part $p" | tee -a "$SUMMARY" ;;
    esac
    tar czf "$OUT/gpu_results.tgz" benchmarks/results/*_gpu* "$LOGS" 2>/dev/null
    [ "$OUT" = "$LOGS" ] || cp "$SUMMARY" "$OUT/summary.txt"
done
echo "packed $OUT/gpu_results.tgz"
