# Session 54: exploit suite after the one-pass comparison; reward-server throughput side by side, the comparison before (old_compare.py, a copy of the repository at /tmp/oldrepo) and after.
# Before running: git show 2bf4546:src/aka/harness/compare.py > old_compare.py
export WORK=/tmp/work27 BATCH_SECONDS=570
rm -rf /tmp/oldrepo && cp -r "$PWD" /tmp/oldrepo && cp old_compare.py /tmp/oldrepo/src/aka/harness/compare.py
TP="python3 benchmarks/reward_throughput.py --tasks triton2triton/basic/gelu triton2triton/llm/rmsnorm_residual triton2triton/llm/silu_and_mul --eval-timeout 60 --no-hanging --copies 2 --singles 0 --max-concurrent 4 --deadline 90"
scripts/h200_batch.sh \
 "0:python3 scripts/gpu_exploit_suite.py --parallel 3 --skip stalls_forever --keep-logs \$WORK/exploit_logs --out \$WORK/exploits.md > \$WORK/exploits_console.log 2>&1; (cd /tmp/oldrepo && PYTHONPATH=/tmp/site:/tmp/oldrepo/src $TP --cache-dir \$WORK/c_old --logs-dir \$WORK/logs_old --out \$WORK/tp_old.md --json \$WORK/tp_old.json > \$WORK/tp_old.log 2>&1); $TP --cache-dir \$WORK/c_new --logs-dir \$WORK/logs_new --out \$WORK/tp_new.md --json \$WORK/tp_new.json > \$WORK/tp_new.log 2>&1"
