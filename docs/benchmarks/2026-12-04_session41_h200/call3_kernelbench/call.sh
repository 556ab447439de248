export WORK=/tmp/work3 BATCH_SECONDS=285
scripts/h200_batch.sh \
 "0:python3 -m aka import kernelbench kbleft --level 1 --family torch2triton --out /tmp/kbtasks --probe-device cuda --probe-jobs 6 > \$WORK/kb1_console.log 2>&1; cp /tmp/kbtasks/torch2triton/kernelbench_level1/import_report.yaml \$WORK/ 2>/dev/null; touch \$WORK/done" \
 "0:while [ ! -e \$WORK/done ]; do sleep 5; cp /tmp/kbtasks/torch2triton/kernelbench_level1/import_report.yaml \$WORK/ 2>/dev/null; nvidia-smi --query-gpu=memory.used --format=csv,noheader >> \$WORK/gpu_mem.log; free -g | sed -n 2p >> \$WORK/host_mem.log; done"
