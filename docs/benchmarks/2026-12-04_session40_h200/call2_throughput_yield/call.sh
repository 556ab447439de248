export WORK=/tmp/work2 BATCH_SECONDS=535
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --cache-dir \$WORK/tpcache"
scripts/h200_batch.sh \
 "0:$TP --max-concurrent 6 --out \$WORK/tp6_y5.md --json \$WORK/tp6_y5.json > \$WORK/tp6_y5.log 2>&1; AKA_DEVICE_YIELD_AFTER_S=1 $TP --max-concurrent 6 --out \$WORK/tp6_y1.md --json \$WORK/tp6_y1.json > \$WORK/tp6_y1.log 2>&1; AKA_DEVICE_YIELD_AFTER_S=1 $TP --max-concurrent 8 --out \$WORK/tp8_y1.md --json \$WORK/tp8_y1.json > \$WORK/tp8_y1.log 2>&1"
