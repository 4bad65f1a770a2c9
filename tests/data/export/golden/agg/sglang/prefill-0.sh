#!/bin/sh
# pddplan export --target sglang: plan 'pdd-agent-64k-agg' (agg), model deepseek-v3.2
# flags checked against SGLang 0.5.23 (PyPI, 2026-10) and sglang-router 0.3.2 (docs/export.md)
# prefill-0: prefill + decode (P+D), 8 x gpu-b in dc-b, one node
set -eu
exec python3 -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3.2-Exp \
    --tp-size 8 \
    --ep-size 8 \
    --attn-dp-size 8 \
    --moe-a2a-backend deepep \
    --chunked-prefill-size 65536 \
    --enable-mixed-chunk \
    --mem-fraction-static 0.9 \
    --page-size 64 \
    --context-length 72704 \
    --kv-cache-dtype fp8_e4m3 \
    --host 0.0.0.0 \
    --port 30000
