"""Model architectures: the shape numbers that weights, FLOPs and KV bytes are computed from.

An architecture is usually imported from a Hugging Face `config.json` (see `pddplan.inputs.hf_import`);
it can also be written by hand as YAML in this schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from pddplan.errors import InputError
from pddplan.specs.common import StrictModel
from pddplan.specs.precision import WeightDtype

LayerKind = Literal["full", "sliding", "linear"]
KvDtype = Literal["bf16", "fp8"]

#: Bytes per element of each activation, KV or state dtype (weights: `precision.weight_format`).
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5}


#: no shape number of a model is larger (the largest vocabularies are ~1e6, FFN widths ~1e5): beyond
#: it a file is a slip or an attack, and per-layer or per-expert arithmetic would run away
MAX_SHAPE_NUMBER = 100_000_000
#: layers: the deepest published models have ~100-200
MAX_LAYERS = 10_000
ShapeNumber = Annotated[int, Field(gt=0, le=MAX_SHAPE_NUMBER)]
ShapeNumberOrZero = Annotated[int, Field(ge=0, le=MAX_SHAPE_NUMBER)]


class MlaSpec(StrictModel):
    """Multi-head latent attention (DeepSeek-V2/V3 style): K and V are stored as one latent."""

    kv_lora_rank: ShapeNumber
    qk_rope_head_dim: ShapeNumber
    qk_nope_head_dim: ShapeNumber
    v_head_dim: ShapeNumber
    q_lora_rank: ShapeNumber | None = None


class IndexerSpec(StrictModel):
    """DeepSeek sparse attention's lightning indexer: a small key cache scored over all tokens,
    after which the main attention reads only `top_k` tokens."""

    num_heads: ShapeNumber
    head_dim: ShapeNumber
    top_k: ShapeNumber


class LinearAttentionSpec(StrictModel):
    """A linear-attention (Gated DeltaNet style) layer: a fixed-size state per sequence."""

    num_key_heads: ShapeNumber
    num_value_heads: ShapeNumber
    key_head_dim: ShapeNumber
    value_head_dim: ShapeNumber
    conv_kernel: ShapeNumber
    state_dtype: Literal["fp32", "bf16"] = "fp32"


class MoeSpec(StrictModel):
    """Mixture-of-experts feed-forward layers."""

    num_experts: ShapeNumber
    experts_per_token: ShapeNumber
    num_shared_experts: ShapeNumberOrZero = 0
    expert_intermediate_size: ShapeNumber
    shared_expert_intermediate_size: ShapeNumberOrZero = Field(
        default=0, description="width of the shared expert block (all shared experts together)"
    )
    first_dense_layers: ShapeNumberOrZero = Field(default=0, description="leading layers with a dense FFN")
    expert_bias: bool = False
    router_bias: bool = False
    shared_expert_gate: bool = False

    @model_validator(mode="after")
    def _topk_fits(self) -> MoeSpec:
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) exceeds num_experts ({self.num_experts})")
        return self


class ModelArchitecture(StrictModel):
    """The architecture of one decoder-only transformer."""

    name: str
    source: str = Field(description="where the shape numbers come from")
    num_layers: Annotated[int, Field(gt=0, le=MAX_LAYERS)]
    hidden_size: ShapeNumber
    vocab_size: ShapeNumber
    tie_word_embeddings: bool = False
    num_heads: ShapeNumber
    num_kv_heads: ShapeNumber
    head_dim: ShapeNumber
    attention_bias: bool = False
    attention_output_gate: bool = Field(default=False, description="query projection doubled for a gate")
    qk_norm: bool = False
    intermediate_size: ShapeNumberOrZero = Field(description="dense FFN width (0 when every layer is MoE)")
    moe: MoeSpec | None = None
    layer_kinds: tuple[LayerKind, ...] = Field(description="per layer; omit when every layer is full attention")
    sliding_window: ShapeNumber | None = None
    mla: MlaSpec | None = None
    indexer: IndexerSpec | None = None
    linear: LinearAttentionSpec | None = None
    weight_dtype: WeightDtype = "bf16"
    expert_weight_dtype: WeightDtype | None = Field(default=None, description="defaults to weight_dtype")
    kv_dtype: KvDtype = "bf16"
    params_total_published: float | None = None
    params_active_published: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_layer_kinds(cls, data: Any) -> Any:
        """Omitted `layer_kinds` means every layer is full attention; a YAML list becomes a tuple."""
        if not isinstance(data, dict):
            return data
        if "layer_kinds" not in data and isinstance(data.get("num_layers"), int):
            return {**data, "layer_kinds": tuple("full" for _ in range(data["num_layers"]))}
        if isinstance(data.get("layer_kinds"), list):
            return {**data, "layer_kinds": tuple(data["layer_kinds"])}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ModelArchitecture:
        if len(self.layer_kinds) != self.num_layers:
            raise ValueError(f"layer_kinds has {len(self.layer_kinds)} entries, num_layers is {self.num_layers}")
        if "sliding" in self.layer_kinds and self.sliding_window is None:
            raise ValueError("sliding layers need sliding_window")
        if "linear" in self.layer_kinds and self.linear is None:
            raise ValueError("linear layers need the `linear` block")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) is not a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.indexer is not None and self.mla is None:
            raise ValueError("an indexer (sparse attention) needs MLA")
        if self.moe is not None and self.moe.first_dense_layers > 0 and self.intermediate_size == 0:
            raise ValueError("first_dense_layers > 0 needs intermediate_size for the dense FFN")
        return self

    @property
    def attention_kind(self) -> Literal["mha", "gqa", "mqa", "mla"]:
        """MLA, or by KV heads: MHA (as many as query heads), MQA (one), GQA (in between)."""
        if self.mla is not None:
            return "mla"
        if self.num_kv_heads == self.num_heads:
            return "mha"
        if self.num_kv_heads == 1:
            return "mqa"
        return "gqa"

    @property
    def expert_dtype(self) -> WeightDtype:
        return self.expert_weight_dtype or self.weight_dtype

    def count(self, kind: LayerKind) -> int:
        """Number of layers of `kind`."""
        return sum(1 for k in self.layer_kinds if k == kind)

    def is_moe_layer(self, index: int) -> bool:
        return self.moe is not None and index >= self.moe.first_dense_layers

    def with_kv_dtype(self, kv_dtype: KvDtype) -> ModelArchitecture:
        """The same model with another KV-cache dtype."""
        return self.model_copy(update={"kv_dtype": kv_dtype})

    def with_weights(self, weights: WeightDtype | None, experts: WeightDtype | None = None) -> ModelArchitecture:
        """The same model stored in `weights` (every weight, the routed experts included), then its
        routed experts in `experts`; None keeps the model's own. InputError for `experts` on a
        model without routed experts."""
        model = self
        if weights is not None:
            model = model.model_copy(update={"weight_dtype": weights, "expert_weight_dtype": None})
        if experts is not None:
            if model.moe is None:
                raise InputError(f"expert_weights = {experts!r}: {self.name} has no routed experts")
            model = model.model_copy(update={"expert_weight_dtype": experts})
        return model
