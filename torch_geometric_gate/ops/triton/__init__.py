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
    may change between versions. Imports Triton: without it, raises an
    :class:`ImportError` saying so."""
    try:
        from torch_geometric_gate.ops.triton import _kernels
    except ModuleNotFoundError as e:
        if e.name != 'triton':
            raise
        raise ImportError(
            "The Triton kernels require Triton; install it with 'pip "
            "install triton' (PyTorch's CUDA builds for Linux bring it)"
        ) from e

    return {name: getattr(_kernels, name) for name in _kernels.__all__}


__all__ = ['kernels', 'triton_attention']
