#!/usr/bin/env bash
# The whole-suite A/B experiment (example_configs/ab_suite_k3.yaml) on one GPU, in device calls of
# a few minutes: run as a lane of scripts/h200_batch.sh (it needs $WORK). RESUME=1 resumes the
# newest run folder here (carry it in, e.g. unpacked from the previous call's $WORK/ab.tgz). The run
# folder, without the evaluation folders that every trial rebuilds, is packed into $WORK/ab.tgz every
# 25 s and at the end; the agents' work/ folders stay in it: a resumed run accepts a finished trial
# only where its sources still hash as its completion record says (aka.run.completion), and only
# where the judge's code is the same (aka.config.tasks.judge_identity): to resume across changes of
# the evaluator, run the lane with the judge frozen at the run's commit, e.g.
#   mkdir .ab_tree && git archive 1b122b6 src tasks | tar -x -C .ab_tree   (carry .ab_tree)
#   "0:PYTHONPATH=/tmp/site:\$PWD/.ab_tree/src RESUME=1 bash scripts/ab_suite_h200.sh"
export AKA_WARM_STEPS=${AKA_WARM_STEPS:-1}
config=${CONFIG:-example_configs/ab_suite_k3.yaml}
latest() { ls -d workspace_*arms-noop-solutions/run_* 2>/dev/null | tail -1; }
pack() {
  d=$(latest)
  [ -n "$d" ] || return 0
  tar czf "$WORK/ab.part" --exclude='evaluation' --exclude='evaluation_heldout' --exclude='builds-*' \
      --exclude='__pycache__' "$d" 2>/dev/null && mv "$WORK/ab.part" "$WORK/ab.tgz"
}
( while sleep 25; do pack; done ) &
packer=$!
if [ "${RESUME:-0}" = 1 ]; then
  python3 -m aka run "$config" --resume-latest --gpus 0 -q
else
  python3 -m aka run "$config" --gpus 0 -q
fi
echo "aka run exit $?"
kill $packer
pack
python3 -m aka compare "$(latest)" --format markdown > "$WORK/compare.md" 2>&1
echo "aka compare exit $?"
