# Reward-server throughput: AKA_DEVICE_YIELD_AFTER_S=1 with AKA_ONE_TURN=1, at 4 and at 8 evaluations in flight.
export WORK=/tmp/work19 BATCH_SECONDS=570
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 100"
scripts/h200_batch.sh \
 "0:AKA_DEVICE_YIELD_AFTER_S=1 AKA_ONE_TURN=1 $TP --cache-dir \$WORK/c3 --logs-dir \$WORK/logs_both4 --out \$WORK/tp_both4.md --json \$WORK/tp_both4.json > \$WORK/tp_both4.log 2>&1; AKA_DEVICE_YIELD_AFTER_S=1 AKA_ONE_TURN=1 ${TP/--max-concurrent 4/--max-concurrent 8} --cache-dir \$WORK/c4 --logs-dir \$WORK/logs_both8 --out \$WORK/tp_both8.md --json \$WORK/tp_both8.json > \$WORK/tp_both8.log 2>&1"
