# Owed (issue 15's target: evaluation time at most 15 s a candidate, median): one evaluation at a time,
# twelve tasks over the families, plus do_bench on every third task for the band ratio.
export WORK=/tmp/work24 BATCH_SECONDS=570
scripts/h200_batch.sh \
 "0:python3 benchmarks/aa_noise.py --tasks triton2triton/basic/gelu triton2triton/llm/softmax triton2triton/llm/layernorm triton2triton/llm/cumsum torch2triton/llm/rmsnorm torch2triton/basic/softmax cuda2cuda/basic/vector_add cuda2cuda/llm/sgemm torch2cuda/llm/softmax instruction2triton/llm/topk e2e/llm/mlp_swiglu_decode repository/llm/minikernels_rmsnorm --repeats 1 --parallel 1 --do-bench-every 3 --keep-logs \$WORK/logs --json \$WORK/aa.json > \$WORK/aa_console.log 2>&1"
