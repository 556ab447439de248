#!/usr/bin/env bash
# GPU evidence in one device call: each argument is "GPU:COMMAND", run in the background on that
# GPU (CUDA_VISIBLE_DEVICES), its output in $OUT/gpuN.log; waits for all of them.
#   scripts/h200_batch.sh "0:python3 benchmarks/aa_noise.py --shard 1/2 --json \$OUT/aa1.json" \
#                         "1:python3 benchmarks/aa_noise.py --shard 2/2 --json \$OUT/aa2.json"
# The machine has torch, triton and nvcc but not our pure-Python dependencies: they come as wheels
# in .whl/ (carried with the working tree) and are installed into /tmp/site.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 OUT
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv,noheader
pids=()
for job in "$@"; do
  gpu=${job%%:*}
  command=${job#*:}
  (export CUDA_VISIBLE_DEVICES=$gpu; eval "$command") > "$OUT/gpu$gpu.$(date +%s%N).log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
tail -n 25 "$OUT"/gpu*.log
exit $status
