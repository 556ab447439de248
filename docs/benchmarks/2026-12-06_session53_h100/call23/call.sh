# Session 53: reward-server throughput at the default settings with 8 evaluations in flight, on the machine that ran call22.
export WORK=/tmp/work23 BATCH_SECONDS=175
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 8 --deadline 100"
scripts/h200_batch.sh \
 "0:$TP --cache-dir \$WORK/c5 --logs-dir \$WORK/logs_default8 --out \$WORK/tp_default8.md --json \$WORK/tp_default8.json > \$WORK/tp_default8.log 2>&1"
