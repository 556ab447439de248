"""Rewards for RL trainers: score candidates (task id + files) without an `aka run` (docs/rl.md).

`KernelEvaluator` evaluates through the same evaluator, frozen baseline and verdict as a run;
`reward` turns a result into a preset reward that always carries the raw metrics;
`extract_files` takes a model completion apart; `adapters/` wraps it all for the trainers.
"""
