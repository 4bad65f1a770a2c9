#!/bin/sh
# pddplan export --target vllm: plan 'pdd-agent-64k-pd-intra' (pd-intra), model deepseek-v3.2
# flags checked against vLLM 0.34.0 (PyPI, 2026-11, commit 62d4bc3c7) (docs/export.md)
set -eu
exec vllm-router \
    --vllm-pd-disaggregation \
    --prefill http://${PREFILL_0_ADDR}:8000 \
    --decode http://${DECODE_0_ADDR}:8000 \
    --prefill-policy cache_aware \
    --decode-policy power_of_two \
    --host 0.0.0.0 \
    --port 8000
