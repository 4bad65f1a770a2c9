"""Weight precisions: bytes per value with their block scales, the GEMM dtype each runs at on each
GPU, the bytes a model's weights take, and the formats read from a checkpoint's
`quantization_config` (pddplan/specs/precision.py, pddplan/inputs/quantization.py)."""

from __future__ import annotations

import pytest
from toys import arch, toy_gpu

from pddplan.errors import InputError
from pddplan.inputs import load_hardware
from pddplan.inputs.quantization import weight_formats
from pddplan.perf.arithmetic import expert_bytes, param_counts, weight_bytes
from pddplan.specs.precision import WEIGHT_FORMATS, weight_bytes_per_value, weight_format


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bf16", 2.0),
        ("fp8", 1.0),
        ("fp8-block", 1.0 + 4.0 / 16384),  # an fp32 scale per 128 x 128 block
        ("nvfp4", 0.5 + 1.0 / 16),  # an e4m3 scale per 16 values
        ("fp4", 0.5 + 1.0 / 16),  # fp4 reads as NVFP4
        ("mxfp4", 0.5 + 1.0 / 32),  # an e8m0 scale per 32 values
        ("int4", 0.5 + 2.5 / 128),  # fp16 scale + 4-bit zero per group of 128
    ],
)
def test_bytes_per_value_include_scales(name: str, expected: float) -> None:
    assert weight_bytes_per_value(name) == pytest.approx(expected, rel=1e-12)


def test_every_format_is_named_and_positive() -> None:
    for name, fmt in WEIGHT_FORMATS.items():
        assert fmt.bytes_per_value > 0, name
        assert fmt.compute in ("bf16", "fp8", "fp4"), name
    assert weight_format("fp4") == weight_format("nvfp4")


@pytest.mark.parametrize(
    ("gpu", "fmt", "dtype"),
    [
        ("b200", "nvfp4", "fp4"),  # Blackwell has FP4 tensor cores
        ("b200", "mxfp4", "fp4"),
        ("b200", "fp8-block", "fp8"),
        ("h100-sxm", "nvfp4", "bf16"),  # no FP4 units: weight-only, dequantized to bf16
        ("h100-sxm", "fp8", "fp8"),
        ("a100-80g", "fp8", "bf16"),  # no FP8 units: Marlin W8A16
        ("a100-80g", "bf16", "bf16"),
        ("h100-sxm", "int4", "bf16"),  # int4 is weight-only everywhere
        ("b200", "int4", "bf16"),
    ],
)
def test_gemm_dtype_on_each_gpu(gpu: str, fmt: str, dtype: str) -> None:
    assert load_hardware(gpu).gemm_dtype(fmt) == dtype


def test_toy_gpu_without_fp4_runs_fp4_weights_at_bf16() -> None:
    assert toy_gpu().gemm_dtype("nvfp4") == "bf16"


def test_weight_bytes_follow_each_format() -> None:
    """A small MoE model: dense weights at one format, experts at another, embeddings bf16."""
    model = arch(
        num_layers=2,
        hidden_size=256,
        vocab_size=1000,
        num_heads=4,
        num_kv_heads=4,
        head_dim=64,
        intermediate_size=0,
        moe={"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 128},
        weight_dtype="fp8-block",
        expert_weight_dtype="nvfp4",
    )
    counts = param_counts(model)
    expected = (
        counts.routed_experts_total * (0.5 + 1 / 16)
        + (counts.non_expert - counts.lm_head) * (1 + 4 / 16384)
        + (counts.embedding + counts.lm_head) * 2.0
    )
    assert weight_bytes(model) == pytest.approx(expected, rel=1e-12)
    assert expert_bytes(model) == pytest.approx(3 * 256 * 128 * (0.5 + 1 / 16), rel=1e-12)


# -- quantization_config -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        (None, ("bf16", "bf16")),
        ({"quant_method": "fp8"}, ("fp8", "fp8")),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("fp8-block", "fp8-block")),
        ({"quant_method": "mxfp4"}, ("bf16", "mxfp4")),  # gpt-oss: only the experts are MXFP4
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, ("nvfp4", "nvfp4")),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, ("fp8", "fp8")),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            ("fp8", "fp8"),
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}},
            },
            ("nvfp4", "nvfp4"),
        ),
        (
            {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}},
            ("int4", "int4"),
        ),
        ({"quant_method": "awq", "bits": 4}, ("int4", "int4")),
        ({"quant_method": "gptq", "bits": 4}, ("int4", "int4")),
    ],
)
def test_quantization_config(quant: dict[str, object] | None, expected: tuple[str, str]) -> None:
    config: dict[str, object] = {} if quant is None else {"quantization_config": quant}
    assert weight_formats(config, "config.json") == expected


def test_quantization_config_under_text_config() -> None:
    config = {"text_config": {"quantization_config": {"quant_method": "fp8"}}}
    assert weight_formats(config, "config.json") == ("fp8", "fp8")


@pytest.mark.parametrize(
    ("quant", "field"),
    [
        ({"quant_method": "gptq", "bits": 8}, "bits"),
        ({"quant_method": "bitsandbytes"}, "quant_method"),
        ({"quant_method": "modelopt", "quant_algo": "INT8_SQ"}, "quant_algo"),
        ({"quant_method": "compressed-tensors", "config_groups": {}}, "config_groups"),
    ],
)
def test_unmodelled_quantization_is_refused_with_its_field(quant: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=rf"config\.json: quantization_config\.{field} = "):
        weight_formats({"quantization_config": quant}, "config.json")


def test_quantization_config_must_be_a_mapping() -> None:
    with pytest.raises(InputError, match="quantization_config = 'fp8': expected a mapping"):
        weight_formats({"quantization_config": "fp8"}, "config.json")
