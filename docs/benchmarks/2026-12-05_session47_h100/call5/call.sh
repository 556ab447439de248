export WORK=/tmp/work5 BATCH_SECONDS=140
scripts/h200_batch.sh \
 "0:python3 scripts/gpu_exploit_suite.py --parallel 3 --only honest_control,sets_a_persisting_l2_window,hoards_the_gpu_memory,forges_an_out_of_memory,works_during_the_hold,keeps_the_gpu_busy_after_its_call --keep-logs \$WORK/exploit_logs --out \$WORK/exploits.md > \$WORK/exploits_console.log 2>&1"
