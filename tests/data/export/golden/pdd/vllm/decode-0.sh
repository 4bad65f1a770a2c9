#!/bin/sh
# pddplan export --target vllm: plan 'pdd-agent-64k-pdd' (pdd), model deepseek-v3.2
# flags checked against vLLM 0.34.0 (PyPI, 2026-11, commit 62d4bc3c7) (docs/export.md)
# decode-0: decoder (D / MD), 16 x gpu-b in dc-b, 2 nodes of 8 GPUs:
# run `decode-0.sh RANK` on each node, rank 0 on the head node, with DECODE_0_ADDR set to the head node's address
set -eu
NODE_RANK="${1:?usage: decode-0.sh NODE_RANK (0 to 1)}"
case "$NODE_RANK" in *[!0-9]* | "") echo "NODE_RANK must be 0 to 1" >&2; exit 2 ;; esac
: "${DECODE_0_ADDR:?set DECODE_0_ADDR to the head node of decode-0}"
if [ "$NODE_RANK" = 0 ]; then
    export UCX_TLS=tcp
    exec vllm serve deepseek-ai/DeepSeek-V3.2-Exp \
        --tensor-parallel-size 1 \
        --data-parallel-size 16 \
        --enable-expert-parallel \
        --all2all-backend deepep_low_latency \
        --data-parallel-size-local 8 \
        --data-parallel-start-rank $(( $NODE_RANK * 8 )) \
        --data-parallel-address "$DECODE_0_ADDR" \
        --data-parallel-rpc-port 13345 \
        --gpu-memory-utilization 0.9 \
        --block-size 64 \
        --max-model-len 72704 \
        --kv-cache-dtype fp8 \
        --enable-prefix-caching \
        --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
        --host 0.0.0.0 \
        --port 8000
fi
export UCX_TLS=tcp
exec vllm serve deepseek-ai/DeepSeek-V3.2-Exp \
    --tensor-parallel-size 1 \
    --data-parallel-size 16 \
    --enable-expert-parallel \
    --all2all-backend deepep_low_latency \
    --data-parallel-size-local 8 \
    --data-parallel-start-rank $(( $NODE_RANK * 8 )) \
    --data-parallel-address "$DECODE_0_ADDR" \
    --data-parallel-rpc-port 13345 \
    --gpu-memory-utilization 0.9 \
    --block-size 64 \
    --max-model-len 72704 \
    --kv-cache-dtype fp8 \
    --enable-prefix-caching \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' \
    --host 0.0.0.0 \
    --port 8000 \
    --headless
