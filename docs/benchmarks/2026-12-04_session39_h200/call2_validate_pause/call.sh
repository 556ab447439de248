export WORK=/tmp/work2 BATCH_SECONDS=510
mkdir -p $WORK/val && cp -r .valres/. $WORK/val/
git rev-parse --short HEAD > $WORK/tree.txt 2>/dev/null || true
scripts/h200_batch.sh \
 "0:AKA_WARM_STEPS=1 python3 -m aka validate all --parallel 8 --resume --output \$WORK/val" \
 "0:AKA_WARM_STEPS=1 python3 scripts/gpu_exploit_suite.py --only escapes_the_pause,keeps_the_gpu_busy_after_its_call --keep-logs \$WORK/exploit_logs --out \$WORK/exploits.md"
