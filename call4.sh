#!/usr/bin/env bash
# Session 35, call 4: the reward server's mix with hanging candidates, after shared turns step
# aside for timed steps (issue 15's stall, issue 19's throughput).
export BATCH_SECONDS=${BATCH_SECONDS:-200} WORK=/tmp/work35
bash scripts/h200_batch.sh "0:AKA_WARM_STEPS=1 python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual --max-concurrent 4 --eval-timeout 60 --singles 0 --json \$WORK/rt.json --out \$WORK/rt.md"
cp $WORK/rt.md $WORK/rt.json $OUT/ 2>/dev/null
cat $OUT/rt.md 2>/dev/null | head -60
