# Session 53: reward-server throughput side by side with call20's default on the same warm machine: AKA_DEVICE_YIELD_AFTER_S=1, AKA_ONE_TURN=1, both.
export WORK=/tmp/work21 BATCH_SECONDS=580
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 100"
scripts/h200_batch.sh \
 "0:AKA_DEVICE_YIELD_AFTER_S=1 $TP --cache-dir \$WORK/c1 --logs-dir \$WORK/logs_yield1 --out \$WORK/tp_yield1.md --json \$WORK/tp_yield1.json > \$WORK/tp_yield1.log 2>&1; AKA_ONE_TURN=1 $TP --cache-dir \$WORK/c2 --logs-dir \$WORK/logs_one_turn --out \$WORK/tp_one_turn.md --json \$WORK/tp_one_turn.json > \$WORK/tp_one_turn.log 2>&1; AKA_DEVICE_YIELD_AFTER_S=1 AKA_ONE_TURN=1 $TP --cache-dir \$WORK/c3 --logs-dir \$WORK/logs_both --out \$WORK/tp_both.md --json \$WORK/tp_both.json > \$WORK/tp_both.log 2>&1"
