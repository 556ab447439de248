export WORK=/tmp/work4 BATCH_SECONDS=230
scripts/h200_batch.sh \
 "0:python3 scripts/gpu_exploit_suite.py --parallel 3 --only wraps_the_baseline_module,keeps_the_gpu_busy_after_its_call,works_during_the_hold,waits_for_the_inputs_during_the_hold,hoards_the_gpu_memory,reaches_across_to_its_other_step,burns_the_gpu_whenever_it_runs --keep-logs \$WORK/exploit_logs --out \$WORK/exploits.md > \$WORK/exploits_console.log 2>&1"
