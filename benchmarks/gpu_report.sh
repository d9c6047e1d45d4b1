#!/usr/bin/env bash
# Every GPU figure of the README's "On a GPU" section, in one run on one machine, most important first:
# the CUDA tests, pretraining throughput against transformers (base, sequence 128 and 512, full and real-length
# batches) with MFU, the torch.compile lever, peak memory and the largest batch, bert-train end to end (its data
# pipeline included), then fine-tuning, ModernBERT at long lengths, integrated gradients, head importance and the
# data pipeline's own rate. Each stage has a time limit, so that one stuck stage cannot take the others' time.
#
#     bash benchmarks/gpu_report.sh OUT_DIR           # on a CUDA machine, from the repository root
#     QUICK=1 bash benchmarks/gpu_report.sh OUT_DIR   # the same stages on the CPU at toy sizes: checks the plumbing
#     BUDGET=540 bash benchmarks/gpu_report.sh OUT_DIR  # stop starting stages so that all ends within 540 s
#
# Needs torch with CUDA, transformers, tokenizers, safetensors and pytest; bertcore runs from the checkout
# (PYTHONPATH), nothing is installed and nothing is downloaded. Everything printed goes to OUT_DIR/report.log.
set -u
out=${1:-gpu-report}
mkdir -p "$out"
log="$out/report.log"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export BERT_EXPLORER_DATA_CACHE=${BERT_EXPLORER_DATA_CACHE:-${TMPDIR:-/tmp}/bert-gpu-report-cache}
py=${PYTHON:-python3}
work=$(mktemp -d)

if [ "${QUICK:-0}" = 1 ]; then  # the plumbing on a CPU: tiny sizes, short limits
    device=cpu dtype=fp32 preset=tiny vocab=8000 b128=8 b512=2 steps=6 scale=2
    export BERTCORE_TEST_DEVICE=cpu
    quick_memory=(--max-batch 64) quick_modernbert=(--tiny --threads 1) quick_ig=(--cases mini@64 --repeats 1)
    quick_heads=(--threads 1 --repeats 5 --corpus-repeats 1 --pairs 64 --points 200) parallel=()
else
    device=cuda dtype=bf16 preset=base vocab=30522 b128=256 b512=64 steps=60 scale=1
    quick_memory=() quick_modernbert=() quick_ig=(--cases base@512,base@128 --repeats 3) quick_heads=(--threads 8)
    parallel=(-n 8)  # pytest-xdist, in the GPU machine's image
fi
deadline=$(( SECONDS + ${BUDGET:-100000} ))
limit() { echo $(( $1 * scale )); }

stage() {  # stage NAME SECONDS COMMAND...: run it under a time limit, its output into the log
    local name=$1 seconds=$2 start=$SECONDS status left=$(( deadline - SECONDS - 5 ))
    shift 2
    if [ "$left" -lt 20 ]; then echo "=== $name: not started, the budget is spent" | tee -a "$log"; return; fi
    [ "$seconds" -gt "$left" ] && seconds=$left
    echo "=== $name ($(date -u +%T) UTC, limit ${seconds} s, load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$log"
    timeout -k 5 "$seconds" "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    echo "=== $name: exit $status after $((SECONDS - start)) s" | tee -a "$log"
}

throughput=("$py" benchmarks/train_throughput.py --preset "$preset" --vocab-size "$vocab" --device "$device"
    --dtype "$dtype" --warmup 5 --rounds 4 --per-round 2)

stage "machine" 30 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
    2>/dev/null; $py -c 'import sys, torch, transformers; print(sys.version.split()[0], \"torch\", torch.__version__, \
\"transformers\", transformers.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available() and \
torch.cuda.get_device_name(0)); import os; print(os.cpu_count(), \"CPU cores\")'"

stage "CUDA tests" "$(limit 150)" "$py" -m pytest -q -rs -m cuda -p no:cacheprovider tests/bertcore/test_cuda.py \
    tests/bertcore/test_finetune.py tests/bertcore/test_masking.py

stage "pretraining, sequence 128, full batches" "$(limit 90)" "${throughput[@]}" --seq-len 128 --batch-size "$b128"
stage "pretraining, sequence 128, corpus batches" "$(limit 90)" "${throughput[@]}" --seq-len 128 --batch-size "$b128" \
    --batches corpus --join-documents 40
stage "pretraining, sequence 512, full batches" "$(limit 90)" "${throughput[@]}" --seq-len 512 --batch-size "$b512"
stage "pretraining, sequence 512, corpus batches" "$(limit 90)" "${throughput[@]}" --seq-len 512 --batch-size "$b512" \
    --batches corpus --join-documents 40
stage "peak memory, the largest batch, the Trainer's out-of-memory message" "$(limit 75)" "$py" \
    benchmarks/gpu_memory.py --device "$device" --preset "$preset" --time-budget 36 "${quick_memory[@]}"

stage "lever: torch.compile, sequence 128, full batches" "$(limit 150)" "${throughput[@]}" --seq-len 128 \
    --batch-size "$b128" --compile --no-transformers

stage "bert-train's loop, data included: batches made by worker processes, and in turn" "$(limit 120)" \
    "$py" benchmarks/train_loop_speed.py --device "$device" --preset "$preset" --batch-size "$b128" --seq-len 128 \
    --steps "$steps" --pairs 1

stage "1-GPU torchrun with NCCL" "$(limit 60)" bash -c "$py -m torch.distributed.run --standalone \
    --nproc_per_node=1 -m bertcore.cli --vocab assets/vocab.txt --preset tiny --device $device --steps 4 \
    --batch-size 8 --out $work/ddp --no-progress"

stage "fine-tuning (sequence classification)" "$(limit 60)" "$py" benchmarks/finetune_throughput.py \
    --device "$device" --dtype "$dtype" --preset "$preset" --vocab-size "$vocab" --batch-size 32 --warmup 5 --rounds 10
stage "ModernBERT at 512 and 8,192 tokens" "$(limit 75)" "$py" benchmarks/modernbert_long.py --device "$device" \
    "${quick_modernbert[@]}"
stage "integrated gradients" "$(limit 75)" "$py" benchmarks/ig_speed.py --device "$device" "${quick_ig[@]}"
stage "head importance" "$(limit 60)" "$py" benchmarks/head_importance.py --device "$device" "${quick_heads[@]}"
stage "the data pipeline alone (CPU)" "$(limit 45)" "$py" benchmarks/data_feed.py
stage "bertcore's tests on this machine's Python and PyTorch (not slow)" "$(limit 150)" "$py" -m pytest -q \
    -p no:cacheprovider -m "not slow" "${parallel[@]}" tests/bertcore

rm -rf "$work"
echo "=== done ($(date -u +%T) UTC)" | tee -a "$log"
