#!/bin/sh
# pddplan export --target sglang: plan 'pdd-agent-64k-pdd' (pdd), model deepseek-v3.2
# flags checked against SGLang 0.5.23 (PyPI, 2026-10) and sglang-router 0.3.2 (docs/export.md)
# prefill-0: prefill (P), 16 x gpu-a in dc-a, 2 nodes of 8 GPUs:
# run `prefill-0.sh RANK` on each node, rank 0 on the head node, with PREFILL_0_ADDR set to the head node's address
set -eu
NODE_RANK="${1:?usage: prefill-0.sh NODE_RANK (0 to 1)}"
case "$NODE_RANK" in *[!0-9]* | "") echo "NODE_RANK must be 0 to 1" >&2; exit 2 ;; esac
: "${PREFILL_0_ADDR:?set PREFILL_0_ADDR to the head node of prefill-0}"
exec python3 -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3.2-Exp \
    --tp-size 16 \
    --ep-size 16 \
    --attn-dp-size 16 \
    --moe-a2a-backend deepep \
    --disaggregation-mode prefill \
    --disaggregation-transfer-backend mooncake \
    --disaggregation-bootstrap-port 8998 \
    --chunked-prefill-size 131072 \
    --mem-fraction-static 0.9 \
    --page-size 64 \
    --context-length 72704 \
    --kv-cache-dtype fp8_e4m3 \
    --nnodes 2 \
    --node-rank $NODE_RANK \
    --dist-init-addr "$PREFILL_0_ADDR":20102 \
    --host 0.0.0.0 \
    --port 30000
