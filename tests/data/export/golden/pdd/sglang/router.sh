#!/bin/sh
# pddplan export --target sglang: plan 'pdd-agent-64k-pdd' (pdd), model deepseek-v3.2
# flags checked against SGLang 0.5.23 (PyPI, 2026-10) and sglang-router 0.3.2 (docs/export.md)
# PDD: the stock router sends every request P -> MD. Sending low-hit requests through the relay
# decoder and handing them to the main decoder is pdd-router.yaml's rule, for a PDD-aware router.
set -eu
exec python3 -m sglang_router.launch_router \
    --pd-disaggregation \
    --prefill http://${PREFILL_0_ADDR}:30000 8998 \
    --decode http://${DECODE_0_ADDR}:30000 \
    --decode http://${DECODE_1_ADDR}:30000 \
    --policy cache_aware \
    --host 0.0.0.0 \
    --port 8000
