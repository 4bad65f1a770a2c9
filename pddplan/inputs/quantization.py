"""The weight format a Hugging Face checkpoint is stored in, from its `quantization_config`.

| quant_method (and fields)                                | dense weights   | routed experts |
|----------------------------------------------------------|-----------------|----------------|
| none                                                     | bf16            | bf16           |
| fp8, fbgemm_fp8 (`weight_block_size` set: block-scaled)  | fp8 / fp8-block | the same       |
| modelopt, `quant_algo` FP8 / NVFP4 / MXFP4               | fp8 / nvfp4 / mxfp4 | the same   |
| compressed-tensors, by the weights' `num_bits` and `type` | fp8, nvfp4 (float 4, groups of 16), int4 | the same |
| mxfp4 (gpt-oss: attention, router, embeddings unconverted) | bf16          | mxfp4          |
| awq, gptq, auto-round (4 bits)                           | int4            | int4           |

Anything else (8-bit integer weights, bitsandbytes, 2-3 bit formats) is refused with the field
and value: pddplan has no step-time model for it; write the model YAML with the nearest format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pddplan.errors import InputError
from pddplan.specs.precision import WeightDtype

SUPPORTED = "bf16, fp8, fp8-block, nvfp4, mxfp4, int4"


def _refuse(source: str, field: str, value: Any) -> InputError:
    return InputError(
        f"{source}: quantization_config.{field} = {value!r}: not a weight format pddplan models "
        f"({SUPPORTED}); write a model YAML with the nearest `weight_dtype`"
    )


def _compressed_tensors(quant: Mapping[str, Any], source: str) -> WeightDtype:
    """The weights' format of a compressed-tensors config: the first config group's `weights`."""
    groups = quant.get("config_groups")
    weights: Any = None
    if isinstance(groups, Mapping):
        for group in groups.values():
            if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping):
                weights = group["weights"]
                break
    if weights is None:
        if "fp8" in str(quant.get("format", "")).lower():
            return "fp8"
        raise _refuse(source, "config_groups", groups)
    bits, kind = weights.get("num_bits"), str(weights.get("type", "")).lower()
    if bits == 8 and kind == "float":
        return "fp8-block" if weights.get("strategy") == "block" else "fp8"
    if bits == 4 and kind == "float":
        return "nvfp4" if weights.get("group_size") in (None, 16) else "mxfp4"
    if bits == 4 and kind == "int":
        return "int4"
    raise _refuse(source, "config_groups.*.weights", {"num_bits": bits, "type": kind})


def weight_formats(config: Mapping[str, Any], source: str) -> tuple[WeightDtype, WeightDtype]:
    """(dense weight format, routed-expert weight format) of a checkpoint (module docstring)."""
    quant = config.get("quantization_config")
    if quant is None:
        text = config.get("text_config")
        quant = text.get("quantization_config") if isinstance(text, Mapping) else None
    if quant is None:
        return "bf16", "bf16"
    if not isinstance(quant, Mapping):
        raise InputError(f"{source}: quantization_config = {quant!r}: expected a mapping")
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4":
        return "bf16", "mxfp4"
    if method in ("fp8", "fbgemm_fp8"):
        return ("fp8-block", "fp8-block") if quant.get("weight_block_size") else ("fp8", "fp8")
    if method == "modelopt":
        algo = str(quant.get("quant_algo", "")).upper()
        if algo == "FP8" or algo.startswith("FP8_"):
            return "fp8", "fp8"
        if algo == "NVFP4" or algo.startswith("W4A8_NVFP4"):
            return "nvfp4", "nvfp4"
        if algo == "MXFP4" or algo.startswith("W4A8_MXFP4"):
            return "mxfp4", "mxfp4"
        raise _refuse(source, "quant_algo", quant.get("quant_algo"))
    if method == "compressed-tensors":
        fmt = _compressed_tensors(quant, source)
        return fmt, fmt
    if method in ("awq", "gptq", "auto-round", "autoround"):
        bits = quant.get("bits", quant.get("w_bit"))
        if bits == 4:
            return "int4", "int4"
        raise _refuse(source, "bits", bits)
    raise _refuse(source, "quant_method", quant.get("quant_method"))
