export WORK=/tmp/work3 BATCH_SECONDS=555
scripts/h200_batch.sh \
 "0:python3 -m aka import kernelbench kbprobs --level 2 --family torch2triton --out /tmp/kbtasks --probe-device cuda --probe-jobs 8 > \$WORK/kb2_console.log 2>&1; cp /tmp/kbtasks/torch2triton/kernelbench_level2/import_report.yaml \$WORK/ 2>/dev/null; touch \$WORK/done" \
 "0:while [ ! -e \$WORK/done ]; do sleep 5; cp /tmp/kbtasks/torch2triton/kernelbench_level2/import_report.yaml \$WORK/ 2>/dev/null; done" \
 "0:python3 scripts/kernelbench_solutions_check.py kbprobs --out \$WORK/solutions.md > \$WORK/solutions_console.log 2>&1"
