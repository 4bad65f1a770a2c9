#!/bin/sh
# pddplan export --target sglang: plan 'pdd-agent-64k-agg' (agg), model deepseek-v3.2
# flags checked against SGLang 0.5.23 (PyPI, 2026-10) and sglang-router 0.3.2 (docs/export.md)
set -eu
exec python3 -m sglang_router.launch_router \
    --worker-urls http://${PREFILL_0_ADDR}:30000 http://${PREFILL_1_ADDR}:30000 http://${PREFILL_2_ADDR}:30000 http://${PREFILL_3_ADDR}:30000 http://${PREFILL_4_ADDR}:30000 http://${PREFILL_5_ADDR}:30000 http://${PREFILL_6_ADDR}:30000 \
    --policy cache_aware \
    --host 0.0.0.0 \
    --port 8000
