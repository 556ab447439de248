export WORK=/tmp/work2 BATCH_SECONDS=555
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 265 --cache-dir \$WORK/tpcache"
scripts/h200_batch.sh \
 "0:$TP --logs-dir \$WORK/tplogs_default --out \$WORK/tp_default.md --json \$WORK/tp_default.json > \$WORK/tp_default.log 2>&1; AKA_ONE_TURN=1 $TP --logs-dir \$WORK/tplogs_one_turn --out \$WORK/tp_one_turn.md --json \$WORK/tp_one_turn.json > \$WORK/tp_one_turn.log 2>&1"
