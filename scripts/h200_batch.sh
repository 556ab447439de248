#!/usr/bin/env bash
# GPU evidence in one device call: each argument is "GPU:COMMAND", run in the background on that
# GPU (CUDA_VISIBLE_DEVICES); waits for all of them, at most BATCH_SECONDS (default 540).
#   scripts/h200_batch.sh "0:python3 benchmarks/aa_noise.py --shard 1/2 --json \$WORK/aa1.json" \
#                         "1:python3 benchmarks/aa_noise.py --shard 2/2 --json \$WORK/aa2.json"
# The device tool brings back at most 8 files from $OUT, so commands write under $WORK (a folder
# outside $OUT) and this script packs $WORK into $OUT/work.tgz every 30 s and at the end: what a
# cut call had written still comes back. Each command's output is $WORK/jobN.log.
# The machine has torch, triton and nvcc but not our pure-Python dependencies: they come as wheels
# in .whl/ (carried with the working tree) and are installed into /tmp/site.
set -u
OUT=${OUT:-/tmp/out}
WORK=${WORK:-/tmp/work}
mkdir -p "$OUT" "$WORK"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 OUT WORK
pack() { tar czf "$OUT/work.tgz.part" -C "$WORK" . 2>/dev/null && mv "$OUT/work.tgz.part" "$OUT/work.tgz"; }
nvidia-smi 2>/dev/null --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv,noheader
pids=()
n=0
for job in "$@"; do
  gpu=${job%%:*}
  command=${job#*:}
  n=$((n + 1))
  (export CUDA_VISIBLE_DEVICES=$gpu; eval "$command") > "$WORK/job$n.log" 2>&1 &
  pids+=($!)
done
( while sleep 30; do pack; done ) &
packer=$!
deadline=$((SECONDS + ${BATCH_SECONDS:-540}))
alive() { for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }
while [ $SECONDS -lt $deadline ] && alive; do sleep 2; done
status=0
for pid in "${pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null; then
    pkill -TERM -P "$pid"; kill -TERM "$pid"; status=1
  else
    wait "$pid" || status=1
  fi
done
sleep 3
kill "$packer" 2>/dev/null
pack
tail -n 15 "$WORK"/job*.log
exit $status
