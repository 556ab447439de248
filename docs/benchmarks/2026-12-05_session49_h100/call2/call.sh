# Owed at the end of session 48 (no device time left): run from the repository root with .whl/
# carried (pytest, pluggy, iniconfig and packaging wheels added to it for the GPU test).
# 1. the GPU test of the allocation shifts and the first GPU run of the worker's Unix-socket filter;
# 2. A/A of the two tasks that lean by evaluation, with and without AKA_ALLOCATION_SHIFTS=8, side by side;
# 3. then (separate calls) the exploit suite at this tree (call1.sh of this folder's call1/), the rest of
#    the whole-suite A/A, and reward_throughput.py with AKA_DEVICE_YIELD_AFTER_S=1 against the default.
export WORK=/tmp/work7 BATCH_SECONDS=330
T="--tasks instruction2triton/llm/moe_align_block_size e2e/llm/mlp_swiglu_decode --repeats 3 --parallel 2 --do-bench-every 0"
scripts/h200_batch.sh \
 "0:python3 -m pytest -q -p no:cacheprovider tests/evaluation/test_shared_memory.py -k 'shift or sized_again' > \$WORK/pytest_gpu.log 2>&1; true" \
 "0:sleep 12; AKA_ALLOCATION_SHIFTS=8 python3 benchmarks/aa_noise.py $T --json \$WORK/aa_shifts8.json --out \$WORK/aa_shifts8.md > \$WORK/aa_shifts8.log 2>&1" \
 "0:sleep 12; AKA_ALLOCATION_SHIFTS=1 python3 benchmarks/aa_noise.py $T --json \$WORK/aa_shifts1.json --out \$WORK/aa_shifts1.md > \$WORK/aa_shifts1.log 2>&1"
