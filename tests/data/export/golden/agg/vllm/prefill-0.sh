#!/bin/sh
# pddplan export --target vllm: plan 'pdd-agent-64k-agg' (agg), model deepseek-v3.2
# flags checked against vLLM 0.34.0 (PyPI, 2026-11, commit 62d4bc3c7) (docs/export.md)
# prefill-0: prefill + decode (P+D), 8 x gpu-b in dc-b, one node
set -eu
exec vllm serve deepseek-ai/DeepSeek-V3.2-Exp \
    --tensor-parallel-size 1 \
    --data-parallel-size 8 \
    --enable-expert-parallel \
    --all2all-backend deepep_high_throughput \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --block-size 64 \
    --max-model-len 72704 \
    --kv-cache-dtype fp8 \
    --enable-prefix-caching \
    --host 0.0.0.0 \
    --port 8000
