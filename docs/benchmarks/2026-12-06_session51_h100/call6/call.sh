export WORK=/tmp/work6 BATCH_SECONDS=560
scripts/h200_batch.sh \
 "0:python3 benchmarks/aa_noise.py --repeats 3 --parallel 3 --json \$WORK/aa.json --out \$WORK/aa.md > \$WORK/aa_console.log 2>&1"
