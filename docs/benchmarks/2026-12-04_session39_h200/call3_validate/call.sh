export WORK=/tmp/work3 BATCH_SECONDS=540
mkdir -p $WORK/val && cp -r .valres/. $WORK/val/
git rev-parse --short HEAD > $WORK/tree.txt 2>/dev/null || true
scripts/h200_batch.sh \
 "0:AKA_WARM_STEPS=1 python3 -m aka validate all --parallel 8 --resume --output \$WORK/val"
