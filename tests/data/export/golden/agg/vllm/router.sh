#!/bin/sh
# pddplan export --target vllm: plan 'pdd-agent-64k-agg' (agg), model deepseek-v3.2
# flags checked against vLLM 0.34.0 (PyPI, 2026-11, commit 62d4bc3c7) (docs/export.md)
set -eu
exec vllm-router \
    --worker-urls http://${PREFILL_0_ADDR}:8000 http://${PREFILL_1_ADDR}:8000 http://${PREFILL_2_ADDR}:8000 http://${PREFILL_3_ADDR}:8000 http://${PREFILL_4_ADDR}:8000 http://${PREFILL_5_ADDR}:8000 http://${PREFILL_6_ADDR}:8000 \
    --policy cache_aware \
    --host 0.0.0.0 \
    --port 8000
