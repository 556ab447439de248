export WORK=/tmp/work10 BATCH_SECONDS=175
scripts/h200_batch.sh \
 "0:python3 benchmarks/aa_noise.py --tasks instruction2triton/llm/flash_attention_causal e2e/llm/llama_block_rmsnorm instruction2triton/llm/fp8_scaled_gemm --repeats 3 --parallel 3 --do-bench-every 0 --keep-logs \$WORK/logs --json \$WORK/aa.json --out \$WORK/aa.md > \$WORK/aa_console.log 2>&1"
