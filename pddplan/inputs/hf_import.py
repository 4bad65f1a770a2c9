"""Turn a Hugging Face `config.json` (read from a local file, never the network) into an architecture.

Families are recognised by the keys they carry rather than by `model_type`, so a new model of a
known shape (GQA, MLA, MoE, sliding window, Gated DeltaNet hybrid) imports without code changes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from pddplan.errors import InputError
from pddplan.inputs.quantization import weight_formats
from pddplan.specs.model import (
    MAX_LAYERS,
    MAX_SHAPE_NUMBER,
    IndexerSpec,
    KvDtype,
    LayerKind,
    LinearAttentionSpec,
    MlaSpec,
    ModelArchitecture,
    MoeSpec,
)


class _Config:
    """A config mapping that names the file and key in every error."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        text = data.get("text_config")
        self.data: Mapping[str, Any] = text if isinstance(text, Mapping) else data
        self.source = source

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def int(self, *keys: str, default: int | None = None) -> int:
        """The first of `keys` present, as an int."""
        for key in keys:
            value = self.data.get(key)
            if value is not None:
                whole = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
                if not whole or int(value) != value:
                    raise InputError(f"{self.source}: {key} = {value!r}: expected a whole number")
                if not -MAX_SHAPE_NUMBER <= value <= MAX_SHAPE_NUMBER:
                    raise InputError(f"{self.source}: {key} = {value!r}: must be at most {MAX_SHAPE_NUMBER:,}")
                return int(value)
        if default is not None:
            return default
        raise InputError(f"{self.source}: {keys[0]}: required field is missing (needed to size the model)")


def architecture_from_hf_config(
    data: Mapping[str, Any],
    name: str,
    source: str,
    kv_dtype: KvDtype | None = None,
    params_total_published: float | None = None,
    params_active_published: float | None = None,
) -> ModelArchitecture:
    """Build a :class:`ModelArchitecture` from the parsed contents of a `config.json`."""
    cfg = _Config(data, source)
    num_layers = cfg.int("num_hidden_layers", "n_layer", "num_layers")
    hidden = cfg.int("hidden_size", "d_model", "n_embd")
    heads = cfg.int("num_attention_heads", "n_head")
    for key, value in (("num_hidden_layers", num_layers), ("hidden_size", hidden), ("num_attention_heads", heads)):
        if value < 1:
            raise InputError(f"{source}: {key} = {value}: must be at least 1")
    if num_layers > MAX_LAYERS:  # before any per-layer list is made
        raise InputError(f"{source}: num_hidden_layers = {num_layers}: must be at most {MAX_LAYERS:,}")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    head_dim = cfg.int("head_dim", default=hidden // heads)
    try:
        mla = _mla(cfg)
        moe = _moe(cfg, num_layers)
        layer_kinds = _layer_kinds(cfg, num_layers)
        linear = _linear(cfg) if "linear" in layer_kinds else None
        weight_dtype, expert_dtype = weight_formats(data, source)
        return ModelArchitecture(
            name=name,
            source=source,
            num_layers=num_layers,
            hidden_size=hidden,
            vocab_size=cfg.int("vocab_size"),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            num_heads=heads,
            num_kv_heads=kv_heads if mla is None else heads,
            head_dim=head_dim if mla is None else mla.qk_nope_head_dim + mla.qk_rope_head_dim,
            attention_bias=bool(cfg.get("attention_bias", cfg.get("qkv_bias", False))),
            attention_output_gate=cfg.get("model_type") == "qwen3_next" or bool(cfg.get("attn_output_gate", False)),
            qk_norm=bool(cfg.get("use_qk_norm", False)) or str(cfg.get("model_type", "")).startswith("qwen3"),
            intermediate_size=_dense_ffn(cfg, moe),
            moe=moe,
            layer_kinds=layer_kinds,
            sliding_window=cfg.int("sliding_window") if "sliding" in layer_kinds else None,
            mla=mla,
            indexer=_indexer(cfg) if mla is not None else None,
            linear=linear,
            weight_dtype=weight_dtype,
            expert_weight_dtype=expert_dtype if expert_dtype != weight_dtype else None,
            kv_dtype=kv_dtype or "bf16",
            params_total_published=params_total_published,
            params_active_published=params_active_published,
        )
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"]) or "config"
        message = str(problem["msg"]).removeprefix("Value error, ")
        value = problem.get("input")
        if where != "config" and not isinstance(value, dict | list):
            message = f"{message} (got {value!r})"
        raise InputError(_in_config_names(f"{source}: {where}: {message}")) from None


# pddplan's field name -> the config.json key it was read from, so errors name what the user wrote
CONFIG_NAMES = {
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
}


def _in_config_names(text: str) -> str:
    """`text` with pddplan's field names replaced by the config.json keys they come from."""
    for ours, theirs in CONFIG_NAMES.items():
        text = re.sub(rf"\b{ours}\b", theirs, text)
    return text


def _mla(cfg: _Config) -> MlaSpec | None:
    if not cfg.has("kv_lora_rank"):
        return None
    return MlaSpec(
        kv_lora_rank=cfg.int("kv_lora_rank"),
        qk_rope_head_dim=cfg.int("qk_rope_head_dim"),
        qk_nope_head_dim=cfg.int("qk_nope_head_dim"),
        v_head_dim=cfg.int("v_head_dim"),
        q_lora_rank=cfg.int("q_lora_rank") if cfg.has("q_lora_rank") else None,
    )


def _indexer(cfg: _Config) -> IndexerSpec | None:
    if not cfg.has("index_n_heads"):
        return None
    return IndexerSpec(
        num_heads=cfg.int("index_n_heads"),
        head_dim=cfg.int("index_head_dim"),
        top_k=cfg.int("index_topk"),
    )


def _moe(cfg: _Config, num_layers: int) -> MoeSpec | None:
    experts = cfg.int("n_routed_experts", "num_experts", "num_local_experts", default=0)
    if experts <= 1:
        return None
    expert_width = cfg.int("moe_intermediate_size", "intermediate_size")
    shared = cfg.int("n_shared_experts", "num_shared_experts", default=0)
    shared_width = cfg.int("shared_expert_intermediate_size", default=0)
    if shared_width and not shared:
        shared = 1
    if shared and not shared_width:
        shared_width = shared * expert_width
    first_dense = cfg.int("first_k_dense_replace", "first_k_dense", default=0)
    mlp_only = cfg.get("mlp_only_layers", [])
    if mlp_only and list(mlp_only) != list(range(len(mlp_only))):
        raise InputError(f"{cfg.source}: mlp_only_layers = {mlp_only}: only leading dense layers are supported")
    first_dense = max(first_dense, len(mlp_only))
    if cfg.int("decoder_sparse_step", "moe_layer_freq", default=1) != 1:
        raise InputError(f"{cfg.source}: decoder_sparse_step/moe_layer_freq != 1 is not supported")
    model_type = str(cfg.get("model_type", ""))
    return MoeSpec(
        num_experts=experts,
        experts_per_token=cfg.int("num_experts_per_tok", "experts_per_token", "moe_topk"),
        num_shared_experts=shared,
        expert_intermediate_size=expert_width,
        shared_expert_intermediate_size=shared_width,
        first_dense_layers=min(first_dense, num_layers),
        expert_bias=model_type == "gpt_oss",
        router_bias=model_type == "gpt_oss" or cfg.get("topk_method") == "noaux_tc",
        shared_expert_gate=model_type == "qwen3_next",
    )


def _dense_ffn(cfg: _Config, moe: MoeSpec | None) -> int:
    """Width of the dense FFN; 0 when every layer is MoE and the config's value means the experts."""
    if moe is None:
        return cfg.int("intermediate_size", "ffn_hidden_size", "n_inner")
    if moe.first_dense_layers == 0:
        return 0
    return cfg.int("intermediate_size")


def _layer_kinds(cfg: _Config, num_layers: int) -> tuple[LayerKind, ...]:
    """Per-layer attention kind from `layer_types`, a full-attention interval, or `attn_type_list`."""
    names = cfg.get("layer_types")
    if names is not None:
        mapping: dict[str, LayerKind] = {
            "full_attention": "full",
            "attention": "full",
            "sliding_attention": "sliding",
            "linear_attention": "linear",
        }
        kinds: list[LayerKind] = []
        for index, layer_type in enumerate(list(names)[:num_layers]):
            if layer_type not in mapping:
                raise InputError(f"{cfg.source}: layer_types[{index}] = {layer_type!r}: unknown layer type")
            kinds.append(mapping[layer_type])
        if len(kinds) != num_layers:
            raise InputError(f"{cfg.source}: layer_types has {len(kinds)} entries, num_hidden_layers is {num_layers}")
        return tuple(kinds)
    if cfg.has("full_attention_interval"):
        interval = cfg.int("full_attention_interval")
        return tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(num_layers))
    attn_types = cfg.get("attn_type_list")
    if attn_types is not None and any(int(t) != 1 for t in attn_types):
        raise InputError(f"{cfg.source}: attn_type_list has non-softmax layers; lightning attention is not modelled")
    if cfg.get("use_sliding_window") and cfg.has("sliding_window") and not cfg.has("max_window_layers"):
        return tuple("sliding" for _ in range(num_layers))
    return tuple("full" for _ in range(num_layers))


def _linear(cfg: _Config) -> LinearAttentionSpec:
    return LinearAttentionSpec(
        num_key_heads=cfg.int("linear_num_key_heads"),
        num_value_heads=cfg.int("linear_num_value_heads"),
        key_head_dim=cfg.int("linear_key_head_dim"),
        value_head_dim=cfg.int("linear_value_head_dim"),
        conv_kernel=cfg.int("linear_conv_kernel_dim", default=4),
    )
