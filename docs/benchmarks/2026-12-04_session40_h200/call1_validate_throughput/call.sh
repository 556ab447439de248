export WORK=/tmp/work1 BATCH_SECONDS=540
mkdir -p $WORK/val && cp -r .valres/. $WORK/val/
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --cache-dir \$WORK/tpcache"
scripts/h200_batch.sh \
 "0:python3 -m aka validate all --parallel 3 --mutants-at-once 3 --resume --output \$WORK/val > \$WORK/validate_console.log 2>&1; AKA_PHASED_SET_UP=0 $TP --max-concurrent 8 --singles 0 --out \$WORK/tp8_p0.md --json \$WORK/tp8_p0.json > \$WORK/tp8_p0.log 2>&1; AKA_PHASED_SET_UP=1 $TP --max-concurrent 8 --singles 0 --out \$WORK/tp8_p1.md --json \$WORK/tp8_p1.json > \$WORK/tp8_p1.log 2>&1"
