# Session 53: reward-server throughput with AKA_DEVICE_YIELD_AFTER_S=1 and AKA_ONE_TURN=1 at 8 evaluations in flight (call21 ran 4).
export WORK=/tmp/work22 BATCH_SECONDS=280
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 8 --deadline 100"
scripts/h200_batch.sh \
 "0:AKA_DEVICE_YIELD_AFTER_S=1 AKA_ONE_TURN=1 $TP --cache-dir \$WORK/c4 --logs-dir \$WORK/logs_both8 --out \$WORK/tp_both8.md --json \$WORK/tp_both8.json > \$WORK/tp_both8.log 2>&1"
