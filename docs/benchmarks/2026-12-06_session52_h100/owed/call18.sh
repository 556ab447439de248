# Reward-server throughput side by side on one warm machine: default, AKA_DEVICE_YIELD_AFTER_S=1, AKA_ONE_TURN=1.
export WORK=/tmp/work18 BATCH_SECONDS=570
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 100"
scripts/h200_batch.sh \
 "0:$TP --cache-dir \$WORK/c0 --logs-dir \$WORK/logs_default --out \$WORK/tp_default.md --json \$WORK/tp_default.json > \$WORK/tp_default.log 2>&1; AKA_DEVICE_YIELD_AFTER_S=1 $TP --cache-dir \$WORK/c1 --logs-dir \$WORK/logs_yield1 --out \$WORK/tp_yield1.md --json \$WORK/tp_yield1.json > \$WORK/tp_yield1.log 2>&1; AKA_ONE_TURN=1 $TP --cache-dir \$WORK/c2 --logs-dir \$WORK/logs_one_turn --out \$WORK/tp_one_turn.md --json \$WORK/tp_one_turn.json > \$WORK/tp_one_turn.log 2>&1"
