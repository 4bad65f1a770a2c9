"""Weight precisions: how many bytes a weight takes (block scales included) and which tensor-core
dtype its GEMMs run at.

A checkpoint's format sets both its memory and its speed. Quantized formats store small values
plus one scale per block of values; the scales are bytes every step reads too:

| format    | bytes per value                                | GEMM dtype | where from                       |
|-----------|------------------------------------------------|------------|----------------------------------|
| bf16      | 2                                              | bf16       |                                  |
| fp8       | 1 (one scale per tensor or channel)            | fp8        | e4m3, vLLM / TensorRT-LLM FP8    |
| fp8-block | 1 + 4 / (128 * 128) (fp32 per 128 x 128 block) | fp8        | DeepSeek-V3 `weight_block_size`  |
| nvfp4     | 0.5 + 1 / 16 (an e4m3 scale per 16 values)     | fp4        | NVIDIA NVFP4, ModelOpt group 16  |
| mxfp4     | 0.5 + 1 / 32 (an e8m0 scale per 32 values)     | fp4        | OCP Microscaling v1.0 (gpt-oss)  |
| int4      | 0.5 + 2.5 / 128 (fp16 scale, 4-bit zero per 128) | bf16     | AWQ / GPTQ, group size 128       |

`fp4` is read as `nvfp4`. A GPU without tensor cores for a format's dtype runs it weight-only:
it dequantizes the weights and multiplies at bf16 (Marlin W4A16 / W8A16 kernels, Triton MXFP4 on
Hopper), so its GEMMs run at the bf16 rate while its weight reads keep the smaller bytes. int4 is
weight-only everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Tensor-core dtypes a GEMM can run at.
ComputeDtype = Literal["bf16", "fp8", "fp4"]
#: Weight formats a model's weights (or its routed experts) can be stored in.
WeightDtype = Literal["bf16", "fp8", "fp8-block", "fp4", "nvfp4", "mxfp4", "int4"]


@dataclass(frozen=True)
class WeightFormat:
    """One weight format: bytes per value, block-scale bytes per value, and the GEMM's dtype."""

    name: str
    value_bytes: float
    scale_bytes: float
    compute: ComputeDtype
    weight_only: bool = False  # multiplies at bf16 on every GPU (dequantized in the kernel)

    @property
    def bytes_per_value(self) -> float:
        """Bytes one weight takes in memory and on every read: value + its share of the scales."""
        return self.value_bytes + self.scale_bytes


WEIGHT_FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat("bf16", 2.0, 0.0, "bf16"),
    "fp8": WeightFormat("fp8", 1.0, 0.0, "fp8"),
    "fp8-block": WeightFormat("fp8-block", 1.0, 4.0 / (128 * 128), "fp8"),
    "nvfp4": WeightFormat("nvfp4", 0.5, 1.0 / 16, "fp4"),
    "fp4": WeightFormat("nvfp4", 0.5, 1.0 / 16, "fp4"),
    "mxfp4": WeightFormat("mxfp4", 0.5, 1.0 / 32, "fp4"),
    "int4": WeightFormat("int4", 0.5, 2.5 / 128, "bf16", weight_only=True),
}


def weight_format(dtype: str) -> WeightFormat:
    """The format named `dtype` (`fp4` is NVFP4)."""
    return WEIGHT_FORMATS[dtype]


def weight_bytes_per_value(dtype: str) -> float:
    """Bytes per weight of `dtype`, block scales included."""
    return WEIGHT_FORMATS[dtype].bytes_per_value
