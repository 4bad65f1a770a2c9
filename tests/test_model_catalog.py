"""The model catalog: every model's parameter counts and KV bytes per token, checked against a hand
computation from its config numbers, and against the reference values of data.md section 4.

Conventions of the counts (pddplan.perf.arithmetic): every weight matrix and bias, norms included
(2 RMSNorms per layer plus the final one); embedding and LM head counted separately unless tied;
MTP / next-token-prediction modules not counted; "active" = everything except the routed experts
a token does not use (so the embedding table counts as active).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pddplan.inputs import load_model, model_index
from pddplan.inputs.browse import model_summary
from pddplan.perf.kv import kv_breakdown, kv_bytes_per_token, linear_state_bytes
from pddplan.support.catalog import catalog_dir


# -- hand formulas, one per attention / FFN family ------------------------------------------------
def gqa_attention(
    d: int, h: int, g: int, k: int, *, bias: bool = False, qk_norm: bool = False, gate: bool = False
) -> int:
    """q: d x h*k (x2 when the query also yields an output gate), k and v: d x g*k each, o: h*k x d;
    biases on q, k, v and o; q_norm and k_norm of k each."""
    q_out = h * k * (2 if gate else 1)
    params = d * q_out + 2 * d * g * k + h * k * d
    if bias:
        params += q_out + 2 * g * k + d
    if qk_norm:
        params += 2 * k
    return params


def mla_attention(d: int, h: int, q_lora: int, kv_lora: int, nope: int, rope: int, v: int) -> int:
    """q_a: d x q_lora (+ its norm q_lora), q_b: q_lora x h*(nope+rope),
    kv_a: d x (kv_lora+rope) (+ its norm kv_lora), kv_b: kv_lora x h*(nope+v), o: h*v x d."""
    q = d * q_lora + q_lora + q_lora * h * (nope + rope)
    kv = d * (kv_lora + rope) + kv_lora + kv_lora * h * (nope + v)
    return q + kv + h * v * d


def dsa_indexer(d: int, q_lora: int, heads: int, head_dim: int) -> int:
    """wq_b: q_lora x heads*head_dim, wk: d x head_dim, k_norm (LayerNorm, weight and bias), weights_proj: d x heads."""
    return q_lora * heads * head_dim + d * head_dim + 2 * head_dim + d * heads


def gated_deltanet(d: int, nk: int, nv: int, dk: int, dv: int, kernel: int) -> int:
    """in_proj_qkvz: d x (2*nk*dk + 2*nv*dv), in_proj_ba: d x 2*nv, conv1d (no bias) over q, k, v channels,
    A_log and dt_bias: nv each, gated norm: dv, out_proj: nv*dv x d."""
    return d * (2 * nk * dk + 2 * nv * dv) + d * 2 * nv + (2 * nk * dk + nv * dv) * kernel + 2 * nv + dv + nv * dv * d


def swiglu(d: int, f: int) -> int:
    """gate, up: d x f; down: f x d."""
    return 3 * d * f


def embeddings(vocab: int, d: int, tied: bool = False) -> int:
    return vocab * d * (1 if tied else 2)


def norms(layers: int, d: int) -> int:
    return layers * 2 * d + d


def dense_model(L: int, d: int, V: int, attention: int, ffn: int) -> int:
    return L * (attention + swiglu(d, ffn)) + norms(L, d) + embeddings(V, d)


# -- per model: (params_total, params_active, kv bytes/token at bf16, kv bytes/token at fp8) -------
def _llama2_7b() -> tuple[int, int, int, int]:
    """Multi-head attention: as many KV heads as query heads (6,738,415,616 parameters)."""
    L, d, h, g, k, f, V = 32, 4096, 32, 32, 128, 11008, 32000
    total = dense_model(L, d, V, gqa_attention(d, h, g, k), f)
    return total, total, 2 * L * g * k * 2, 2 * L * g * k * 1


def _llama_8b() -> tuple[int, int, int, int]:
    L, d, h, g, k, f, V = 32, 4096, 32, 8, 128, 14336, 128256
    total = dense_model(L, d, V, gqa_attention(d, h, g, k), f)
    return total, total, 2 * L * g * k * 2, 2 * L * g * k * 1


def _llama_70b() -> tuple[int, int, int, int]:
    L, d, h, g, k, f, V = 80, 8192, 64, 8, 128, 28672, 128256
    total = dense_model(L, d, V, gqa_attention(d, h, g, k), f)
    return total, total, 2 * L * g * k * 2, 2 * L * g * k * 1


def _llama_405b() -> tuple[int, int, int, int]:
    L, d, h, g, k, f, V = 126, 16384, 128, 8, 128, 53248, 128256
    total = dense_model(L, d, V, gqa_attention(d, h, g, k), f)
    return total, total, 2 * L * g * k * 2, 2 * L * g * k * 1


def _qwen3_32b() -> tuple[int, int, int, int]:
    L, d, h, g, k, f, V = 64, 5120, 64, 8, 128, 25600, 151936
    total = dense_model(L, d, V, gqa_attention(d, h, g, k, qk_norm=True), f)
    return total, total, 2 * L * g * k * 2, 2 * L * g * k * 1


def _moe_gqa(
    L: int, d: int, h: int, g: int, k: int, V: int, E: int, top: int, w: int, qk_norm: bool
) -> tuple[int, int, int, int]:
    """Every layer MoE, no shared expert: router d x E, E experts of swiglu(d, w)."""
    attn = gqa_attention(d, h, g, k, qk_norm=qk_norm)
    base = L * (attn + d * E) + norms(L, d) + embeddings(V, d)
    return base + L * E * swiglu(d, w), base + L * top * swiglu(d, w), 2 * L * g * k * 2, 2 * L * g * k


def _qwen3_30b_a3b() -> tuple[int, int, int, int]:
    return _moe_gqa(L=48, d=2048, h=32, g=4, k=128, V=151936, E=128, top=8, w=768, qk_norm=True)


def _qwen3_235b_a22b() -> tuple[int, int, int, int]:
    return _moe_gqa(L=94, d=4096, h=64, g=4, k=128, V=151936, E=128, top=8, w=1536, qk_norm=True)


def _minimax_m2() -> tuple[int, int, int, int]:
    return _moe_gqa(L=62, d=3072, h=48, g=8, k=128, V=200064, E=256, top=8, w=1536, qk_norm=True)


def _glm_45() -> tuple[int, int, int, int]:
    # 92 layers; the first 3 have a dense FFN of 12288; the other 89: router d x 160, one shared expert
    # of width 1536, 160 routed experts of width 1536 (top 8). No attention bias / qk-norm keys in the
    # shipped (abridged) config, so none are counted.
    L, d, h, g, k, V = 92, 5120, 96, 8, 128, 151552
    f, first, E, top, w = 12288, 3, 160, 8, 1536
    moe_layers = L - first
    base = L * gqa_attention(d, h, g, k) + first * swiglu(d, f) + norms(L, d) + embeddings(V, d)
    base += moe_layers * (d * E + swiglu(d, w))
    return (
        base + moe_layers * E * swiglu(d, w),
        base + moe_layers * top * swiglu(d, w),
        2 * L * g * k * 2,
        2 * L * g * k,
    )


def _gpt_oss_120b() -> tuple[int, int, int, int]:
    # 36 layers alternating sliding (window 128) / full; q, k, v, o with bias; router d x 128 + bias;
    # experts: gate_up d x 2w + 2w bias, down w x d + d bias; top 4.
    L, d, h, g, k, V = 36, 2880, 64, 8, 64, 201088
    E, top, w = 128, 4, 2880
    expert = 3 * d * w + 2 * w + d
    base = L * (gqa_attention(d, h, g, k, bias=True) + d * E + E) + norms(L, d) + embeddings(V, d)
    full_layers = 18
    return base + L * E * expert, base + L * top * expert, 2 * full_layers * g * k * 2, 2 * full_layers * g * k


def _qwen3_next_80b_a3b() -> tuple[int, int, int, int]:
    # 48 layers, full attention every 4th (12 full, gated, qk-norm), 36 Gated DeltaNet layers
    # (16 key heads, 32 value heads, 128 x 128, conv 4); every layer MoE: router d x 512, a shared
    # expert of 512 with a sigmoid gate d x 1, 512 routed experts of 512 (top 10).
    L, d, h, g, k, V = 48, 2048, 16, 2, 256, 151936
    full, linear = 12, 36
    E, top, w, shared = 512, 10, 512, 512
    attn = full * gqa_attention(d, h, g, k, qk_norm=True, gate=True) + linear * gated_deltanet(d, 16, 32, 128, 128, 4)
    base = attn + L * (d * E + swiglu(d, shared) + d) + norms(L, d) + embeddings(V, d)
    return base + L * E * swiglu(d, w), base + L * top * swiglu(d, w), 2 * full * g * k * 2, 2 * full * g * k


def _deepseek(h: int, E: int, first: int, V: int, router_bias: bool, indexer: bool) -> tuple[int, int, int, int]:
    # 61 layers, MLA (q_lora 1536, kv_lora 512, nope 128, rope 64, v 128); the first `first` layers
    # dense (18432); the others: router d x E (+E correction bias for noaux_tc), one shared expert
    # and E routed experts of width 2048, top 8.
    L, d, f, w, top = 61, 7168, 18432, 2048, 8
    attn = mla_attention(d, h, 1536, 512, 128, 64, 128)
    if indexer:
        attn += dsa_indexer(d, 1536, 64, 128)
    moe_layers = L - first
    base = L * attn + first * swiglu(d, f) + norms(L, d) + embeddings(V, d)
    base += moe_layers * (d * E + (E if router_bias else 0) + swiglu(d, w))
    indexer_bytes = (128 + 4) if indexer else 0  # fp8 key + fp32 scale, at either KV dtype
    kv_bf16 = L * ((512 + 64) * 2 + indexer_bytes)
    kv_fp8 = L * (512 + 4 * math.ceil(512 / 128) + 2 * 64 + indexer_bytes)
    return base + moe_layers * E * swiglu(d, w), base + moe_layers * top * swiglu(d, w), kv_bf16, kv_fp8


def _deepseek_v3() -> tuple[int, int, int, int]:
    return _deepseek(h=128, E=256, first=3, V=129280, router_bias=True, indexer=False)


def _deepseek_v32() -> tuple[int, int, int, int]:
    return _deepseek(h=128, E=256, first=3, V=129280, router_bias=True, indexer=True)


def _kimi_k2() -> tuple[int, int, int, int]:
    # the shipped (abridged) config has no topk_method, so no router correction bias is counted
    return _deepseek(h=64, E=384, first=1, V=163840, router_bias=False, indexer=False)


HAND = {
    "llama-2-7b": _llama2_7b,
    "llama-3.1-8b": _llama_8b,
    "llama-3.1-70b": _llama_70b,
    "llama-3.1-405b": _llama_405b,
    "qwen3-32b": _qwen3_32b,
    "qwen3-30b-a3b": _qwen3_30b_a3b,
    "qwen3-235b-a22b": _qwen3_235b_a22b,
    "qwen3-next-80b-a3b": _qwen3_next_80b_a3b,
    "deepseek-v3": _deepseek_v3,
    "deepseek-v3.2": _deepseek_v32,
    "kimi-k2": _kimi_k2,
    "glm-4.5": _glm_45,
    "minimax-m2": _minimax_m2,
    "gpt-oss-120b": _gpt_oss_120b,
}

#: data.md section 4: KV bytes per token of a long context (full-attention layers), bf16 and fp8.
REFERENCE_KV = {
    "llama-3.1-8b": (131_072, 65_536),
    "llama-3.1-70b": (327_680, 163_840),
    "llama-3.1-405b": (516_096, 258_048),
    "qwen3-32b": (262_144, 131_072),
    "qwen3-235b-a22b": (192_512, 96_256),
    "qwen3-next-80b-a3b": (24_576, 12_288),
    "deepseek-v3": (70_272, 40_016),
    "deepseek-v3.2": (78_324, 48_068),
    "kimi-k2": (70_272, 40_016),
    "glm-4.5": (376_832, 188_416),
    "minimax-m2": (253_952, 126_976),
    "gpt-oss-120b": (36_864, 18_432),
}

CATALOG = list(model_index())


def summary(name: str, kv_dtype: Any = None) -> dict[str, Any]:
    return model_summary(load_model(name, kv_dtype))


def test_every_catalog_model_has_a_hand_computation() -> None:
    assert set(CATALOG) == set(HAND)


def test_index_entries_are_complete() -> None:
    folder = catalog_dir("model_catalog")
    for name, entry in model_index().items():
        assert (folder / str(entry.get("file", f"{name}.json"))).is_file(), name
        assert entry["source"], name
        assert entry["params_total_published"] > 0, name
        assert 0 < entry["params_active_published"] <= entry["params_total_published"], name


@pytest.mark.parametrize("name", CATALOG)
def test_params_and_kv_match_the_hand_computation(name: str) -> None:
    total, active, kv_bf16, kv_fp8 = HAND[name]()
    bf16 = summary(name, "bf16")
    assert bf16["params_total"] == total
    assert bf16["params_active"] == active
    assert bf16["kv_bytes_per_token"] == kv_bf16
    fp8 = summary(name, "fp8")
    assert fp8["kv_bytes_per_token"] == kv_fp8
    assert fp8["params_total"] == total  # the KV dtype does not change the weights


@pytest.mark.parametrize("name", sorted(REFERENCE_KV))
def test_kv_matches_data_md_reference(name: str) -> None:
    bf16, fp8 = REFERENCE_KV[name]
    assert kv_bytes_per_token(load_model(name, "bf16")) == bf16
    assert kv_bytes_per_token(load_model(name, "fp8")) == fp8


def test_default_kv_dtypes() -> None:
    """BF16 unless the index says otherwise: DeepSeek-V3.2 defaults to vLLM's FP8 layout."""
    for name in CATALOG:
        expected = "fp8" if name == "deepseek-v3.2" else "bf16"
        assert load_model(name).kv_dtype == expected, name
    assert kv_bytes_per_token(load_model("deepseek-v3.2")) == 48_068
    assert kv_bytes_per_token(load_model("deepseek-v3")) == 70_272


def test_llama_8b_exact_parameter_count() -> None:
    s = summary("llama-3.1-8b")
    assert s["params_total"] == 8_030_261_248
    assert s["params_active"] == 8_030_261_248


def test_qwen3_next_matches_the_exact_published_counts() -> None:
    """data.md [M2]: the sister Qwen3-Coder-Next (same shape) totals 79,674,391,296 / 3,874,929,408."""
    s = summary("qwen3-next-80b-a3b")
    assert s["params_total"] == 79_674_391_296
    assert s["params_active"] == 3_874_929_408


def test_gpt_oss_active_without_the_embedding_table_is_the_published_5_13b() -> None:
    """OpenAI's 5.13B active excludes the embedding table (pddplan counts it as active)."""
    s = summary("gpt-oss-120b")
    embedding = 201088 * 2880
    assert s["params_breakdown"]["embedding"] == embedding
    assert (s["params_active"] - embedding) / 5.13e9 == pytest.approx(1, abs=0.001)
    assert s["params_total"] / 116.83e9 == pytest.approx(1, abs=0.0001)


#: |computed / published - 1| for params_total. The published figures are rounded (8.03B, "1T", "355B");
#: Kimi K2's "1T" is the loosest: data.md [M1] computes about 1.03T.
TOTAL_TOLERANCE = dict.fromkeys(HAND, 0.01) | {"kimi-k2": 0.03}


@pytest.mark.parametrize("name", CATALOG)
def test_params_total_near_the_published_figure(name: str) -> None:
    s = summary(name)
    published = model_index()[name]["params_total_published"]
    assert s["params_total_published"] == published
    assert abs(s["params_total"] / published - 1) <= TOTAL_TOLERANCE[name]


def test_sliding_window_layers_are_counted_separately() -> None:
    model = load_model("gpt-oss-120b")
    assert model.count("full") == 18 and model.count("sliding") == 18
    assert model.layer_kinds[:2] == ("sliding", "full")
    assert model.sliding_window == 128
    kv = kv_breakdown(model)
    per_layer = 2 * 8 * 64 * 2  # 2,048 B
    assert kv.full_bytes_per_token == 18 * per_layer == 36_864
    assert kv.sliding_bytes_per_token == 18 * per_layer == 36_864
    assert kv.sliding_window_tokens == 128
    assert kv.linear_state_bytes == 0
    # short handoff (seq <= window): all 36 layers per token, 73,728 B (data.md section 4)
    assert kv.full_bytes_per_token + kv.sliding_bytes_per_token == 73_728


def test_qwen3_next_linear_state() -> None:
    model = load_model("qwen3-next-80b-a3b")
    assert model.count("full") == 12 and model.count("linear") == 36
    # full attention is every 4th layer (full_attention_interval 4)
    assert [i for i, kind in enumerate(model.layer_kinds) if kind == "full"] == list(range(3, 48, 4))
    recurrent = 36 * 32 * 128 * 128 * 4  # 36 layers x 32 value heads x dk x dv x fp32
    conv = 36 * (2 * 16 * 128 + 32 * 128) * (4 - 1) * 2  # q, k, v channels x (kernel - 1) x bf16
    assert recurrent == 75_497_472
    assert linear_state_bytes(model) == recurrent + conv == 77_266_944
    assert kv_breakdown(model).linear_state_bytes == 77_266_944
    assert summary("qwen3-next-80b-a3b")["kv_breakdown"]["linear_state_bytes_per_sequence"] == 77_266_944


def test_attention_kinds() -> None:
    kinds = {name: summary(name)["attention"] for name in CATALOG}
    for name in ("deepseek-v3", "deepseek-v3.2", "kimi-k2"):
        assert kinds[name] == "mla"
    for name in ("llama-3.1-8b", "qwen3-32b", "glm-4.5", "minimax-m2", "gpt-oss-120b", "qwen3-next-80b-a3b"):
        assert kinds[name] == "gqa"


def test_weight_dtypes() -> None:
    # gpt-oss ships MXFP4 experts (quant_method mxfp4); DeepSeek-V3's quantization_config has
    # weight_block_size [128, 128] (block-scaled FP8). Kimi-K2's abridged config lost its
    # quantization_config and the index sets what the hub checkpoint holds: block-128 FP8.
    assert (load_model("gpt-oss-120b").weight_dtype, load_model("gpt-oss-120b").expert_dtype) == ("bf16", "mxfp4")
    deepseek = load_model("deepseek-v3")
    assert (deepseek.weight_dtype, deepseek.expert_dtype) == ("fp8-block", "fp8-block")
    assert (load_model("kimi-k2").weight_dtype, load_model("kimi-k2").expert_dtype) == ("fp8-block", "fp8-block")
    assert load_model("llama-3.1-70b").weight_dtype == "bf16"
    assert load_model("minimax-m2").weight_dtype == "fp8"


def test_weight_bytes_hand_computed() -> None:
    # llama-3.1-8b: all bf16
    assert summary("llama-3.1-8b")["weight_bytes"] == 8_030_261_248 * 2
    # gpt-oss-120b: routed experts MXFP4 (0.5 B a value + one 1-byte e8m0 scale per 32 values:
    # 0.5 + 1/32 = 0.53125 B), everything else bf16
    s = summary("gpt-oss-120b")
    experts = s["params_breakdown"]["routed_experts"]
    assert experts == 36 * 128 * (3 * 2880 * 2880 + 2 * 2880 + 2880)
    assert s["weight_bytes"] == experts * 0.53125 + (s["params_total"] - experts) * 2
    # deepseek-v3: block-scaled fp8 checkpoint (1 B a value + one 4-byte fp32 scale per 128 x 128
    # block: 1 + 4/16384 B), embedding and LM head kept at bf16
    s = summary("deepseek-v3")
    emb = 2 * 129280 * 7168
    assert s["weight_bytes"] == (s["params_total"] - emb) * (1 + 4 / 16384) + emb * 2
