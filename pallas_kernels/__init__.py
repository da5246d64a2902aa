"""Low-precision formats and kernels: MXFP8 and NVFP4 quantizers, FP4 packing, the random
Hadamard transform and block-scaled matmuls.

Every op has a pure-jnp reference and a Pallas kernel (``impl="reference" | "pallas" |
"auto"``); on CPU the kernel runs with ``interpret=True`` and is bit-identical to the
reference. See docs/low_precision.md. Imports only jax.
"""
from pallas_kernels.formats import E2M1, E4M3, E8M0, MXFP8_BLOCK, NVFP4_BLOCK
from pallas_kernels.hadamard import hadamard_sign, random_hadamard_transform
from pallas_kernels.mxfp8 import dequantize_mxfp8, quantize_mxfp8
from pallas_kernels.nvfp4 import dequantize_nvfp4, quantize_nvfp4
from pallas_kernels.packing import pack_fp4, unpack_fp4
from pallas_kernels.matmul import grouped_scaled_matmul, scaled_matmul

__all__ = [
    "E2M1", "E4M3", "E8M0", "MXFP8_BLOCK", "NVFP4_BLOCK",
    "quantize_mxfp8", "dequantize_mxfp8", "quantize_nvfp4", "dequantize_nvfp4",
    "pack_fp4", "unpack_fp4", "hadamard_sign", "random_hadamard_transform",
    "scaled_matmul", "grouped_scaled_matmul",
]
