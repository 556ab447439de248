python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
git rev-parse --short HEAD 2>/dev/null
timeout 230 python3 scripts/gpu_exploit_suite.py --only keeps_the_gpu_busy_after_its_call,shrinks_its_reported_time,works_on_a_side_stream,sets_a_persisting_l2_window,cache_by_pointer --keep-logs $OUT --out $OUT/suite.md 2>&1 | tail -9
grep -h "INFO aka.harness.perf" $OUT/honest_control.log | head -12
