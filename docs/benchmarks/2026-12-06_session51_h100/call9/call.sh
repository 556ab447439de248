export WORK=/tmp/work8 BATCH_SECONDS=290
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 125"
scripts/h200_batch.sh \
 "0:AKA_DEVICE_YIELD_AFTER_S=1 $TP --cache-dir \$WORK/tpcache1 --logs-dir \$WORK/tplogs_yield1 --out \$WORK/tp_yield1.md --json \$WORK/tp_yield1.json > \$WORK/tp_yield1.log 2>&1; $TP --cache-dir \$WORK/tpcache5 --logs-dir \$WORK/tplogs_yield5 --out \$WORK/tp_yield5.md --json \$WORK/tp_yield5.json > \$WORK/tp_yield5.log 2>&1"
