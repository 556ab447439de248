# Session 54: reward-server throughput at the default, with the pairs' finer parts (reference, ablation, each side's call and pause, the check) in the judge logs.
export WORK=/tmp/work26 BATCH_SECONDS=300
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 100"
scripts/h200_batch.sh \
 "0:$TP --cache-dir \$WORK/c0 --logs-dir \$WORK/logs_default --out \$WORK/tp_default.md --json \$WORK/tp_default.json > \$WORK/tp_default.log 2>&1"
