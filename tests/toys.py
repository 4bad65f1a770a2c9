"""Hand-built shapes and a round-number GPU the formula tests compute their expected values from.

Each test file builds what it pins from these (`arch(**GQA)`, `toy_gpu(hbm_gb=...)`); the
hand-computed numbers in the tests depend on them, so change a shape here only with its tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pddplan.specs.hardware import HardwareProfile
from pddplan.specs.model import ModelArchitecture


def fig(value: float) -> dict[str, Any]:
    """A figure with a test source."""
    return {"value": value, "source": "assumption: test"}


def toy_gpu(**over: float) -> HardwareProfile:
    """1,000 / 2,000 TFLOP/s (bf16 / fp8), 100 GB at 4 TB/s, 500 GB/s scale-up over 8 GPUs, 400 Gb/s NIC."""
    v = {"bf16": 1000.0, "fp8": 2000.0, "hbm_gb": 100.0, "tb": 4.0, "su": 500.0, "domain": 8.0, "nic": 400.0, **over}
    return HardwareProfile.model_validate(
        {
            "name": "toy-gpu",
            "description": "round numbers",
            "compute": {"bf16_dense_tflops": fig(v["bf16"]), "fp8_dense_tflops": fig(v["fp8"])},
            "memory": {"hbm_gb": fig(v["hbm_gb"]), "hbm_tb_per_s": fig(v["tb"])},
            "interconnect": {
                "scale_up_gb_per_s": fig(v["su"]),
                "scale_up_domain": fig(v["domain"]),
                "nic_gbps": fig(v["nic"]),
            },
            "power": {"tdp_w": fig(700.0)},
            "price": {"rental_usd_per_gpu_hour": fig(2.0)},
        }
    )


def arch(**fields: Any) -> ModelArchitecture:
    """A model named toy from its shape fields."""
    return ModelArchitecture.model_validate({"name": "toy", "source": "test: hand-built", **fields})


# A 2-layer GQA model: d=1024, h=8 query heads, g=2 KV heads, k=128, f=4096, V=1000.
GQA: dict[str, Any] = {
    "num_layers": 2,
    "hidden_size": 1024,
    "vocab_size": 1000,
    "num_heads": 8,
    "num_kv_heads": 2,
    "head_dim": 128,
    "intermediate_size": 4096,
}

# Two sliding-window (128 tokens) layers and two full-attention layers.
SLIDING: dict[str, Any] = {
    "num_layers": 4,
    "hidden_size": 512,
    "vocab_size": 1000,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "layer_kinds": ["sliding", "full", "sliding", "full"],
    "sliding_window": 128,
}

# Three Gated-DeltaNet layers and one full-attention layer.
LINEAR: dict[str, Any] = {
    "num_layers": 4,
    "hidden_size": 512,
    "vocab_size": 1000,
    "num_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "layer_kinds": ["linear", "linear", "linear", "full"],
    "linear": {"num_key_heads": 2, "num_value_heads": 4, "key_head_dim": 32, "value_head_dim": 32, "conv_kernel": 4},
}

PLANS = Path(__file__).resolve().parent / "data" / "plans"


def plan_data(name: str, **changes: Any) -> dict[str, Any]:
    """tests/data/plans/NAME.yaml as a dict, with `changes` applied: a dict value is merged into the
    role or section it names, anything else replaces it."""
    data: dict[str, Any] = yaml.safe_load((PLANS / f"{name}.yaml").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data
