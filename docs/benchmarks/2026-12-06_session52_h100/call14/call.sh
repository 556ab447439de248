export WORK=/tmp/work14 BATCH_SECONDS=540
scripts/h200_batch.sh \
 "0:python3 benchmarks/aa_noise.py --repeats 2 --parallel 3 --do-bench-every 0 --shard 1/2 --keep-logs \$WORK/logs --json \$WORK/aa.json --out \$WORK/aa.md > \$WORK/aa_console.log 2>&1"
