r"""GATE's Triton kernels: :func:`triton_attention` (which the switch,
:func:`~torch_geometric_gate.ops.attention_kernel`, runs) and
:func:`kernels`, the jitted kernels themselves for tools that compile or
inspect them."""

from typing import Dict

from .op import triton_attention


def kernels() -> Dict[str, object]:
    r"""The Triton kernels that ``triton_attention`` launches, by name
    (Triton's :obj:`JITFunction` objects, or the interpreter's under
    :obj:`TRITON_INTERPRET=1`): for tools that compile them for a GPU
    target or record their launches, as ``benchmark/triton_compile.py``
    does (their registers and spills from ``ptxas``, no GPU needed). The
    names, signatures and number of kernels follow the implementation and
    may change between versions. Imports Triton."""
    from torch_geometric_gate.ops.triton import _kernels

    return {name: getattr(_kernels, name) for name in _kernels.__all__}


__all__ = ['kernels', 'triton_attention']
