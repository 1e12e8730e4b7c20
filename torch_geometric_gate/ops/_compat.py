r"""Every private PyTorch API that the package uses (the kernels and the
input checks), in one place.

Tested with torch 2.13 (CPU, this repository's test suite) and torch 2.11
(CUDA, the GPU sessions of ``benchmark/gpu_session.sh``). When PyTorch
changes one of these, this module is the one to adapt; nothing else in
:mod:`torch_geometric_gate` touches ``torch._C``, ``torch._dynamo`` or
another private name of torch.
"""

from typing import ContextManager, Dict

import torch
from torch import Tensor
from torch._dynamo.exc import BackendCompilerFailed

#: The versions of torch this module was tested with.
TESTED_TORCH_VERSIONS = ('2.11', '2.13')

#: Raised by :func:`torch.compile` when Inductor cannot build its code (no
#: working C++ compiler).
CompilerFailed = BackendCompilerFailed

# The key of tensors batched by `is_grads_batched=True`:
_BATCHED = torch._C._parse_dispatch_key('Batched')


def below_autograd() -> ContextManager:
    r"""A context below autograd's dispatch keys (a custom operator's
    kernel runs there), whether or not the caller was called through
    autograd: Dynamo's guards see the dispatch keys a context leaves a
    tensor, so that one compiled variant serves both."""
    return torch._C._AutoDispatchBelowADInplaceOrView()


def functorch_active() -> bool:
    r"""Whether a :mod:`torch.func` transform is active."""
    return torch._C._are_functorch_transforms_active()


def wrapped(*tensors: Tensor) -> bool:
    r"""Whether a :mod:`torch.func` transform is active or one of
    :obj:`tensors` is batched (under :func:`torch.vmap` or batched
    gradients): their values cannot be read, nor handed to code that takes
    plain tensors."""
    if torch._C._functorch.maybe_current_level() is not None:
        return True
    return any(torch._C._dispatch_keys(t).has(_BATCHED) for t in tensors)


def forward_ad_active() -> bool:
    r"""Whether forward-mode AD is active (dual tensors exist only inside
    :func:`torch.autograd.forward_ad.dual_level`)."""
    return torch.autograd.forward_ad._current_level >= 0


def cpu_acc_reads_option(threshold: int) -> Dict[str, int]:
    r"""Inductor's option (for :func:`torch.compile`'s :obj:`options`,
    which refuses a name its Inductor lacks) that stores an intermediate of
    a CPU loop read by more than :obj:`threshold` loads (summed over its
    inputs) rather than recompute it: ``realize_cpu_acc_reads_threshold``
    where Inductor has it (torch 2.13, default 12), else
    ``realize_acc_reads_threshold`` (torch 2.11, every device's, default
    8)."""
    from torch._inductor import config

    if hasattr(config, 'realize_cpu_acc_reads_threshold'):
        return {'realize_cpu_acc_reads_threshold': threshold}
    return {'realize_acc_reads_threshold': threshold}


def mark_dynamic(t: Tensor, dim: int) -> None:
    r"""Compiles dimension :obj:`dim` of :obj:`t` as dynamic where it can
    be (:func:`torch._dynamo.maybe_mark_dynamic`)."""
    torch._dynamo.maybe_mark_dynamic(t, dim)


def index_to_ptr32(index: Tensor, size: int) -> Tensor:
    r"""The int32 pointer (:obj:`size + 1` entries) of a sorted
    :obj:`index` over :obj:`size` rows, in one operator
    (:func:`torch_geometric.index.index2ptr` returns :obj:`index`'s dtype:
    an int64 index costs one more operator for the cast)."""
    return torch._convert_indices_from_coo_to_csr(index, size, out_int32=True)


def ptr_to_index32(ptr: Tensor, col: Tensor) -> Tensor:
    r"""The int32 row of every entry of the CSR :obj:`(ptr, col)`, in one
    operator (:func:`torch_geometric.index.ptr2index` takes three)."""
    return torch._convert_indices_from_csr_to_coo(ptr, col, out_int32=True)[0]


def assert_async(condition: Tensor, message: str) -> None:
    r"""Raises :obj:`RuntimeError(message)` where the one-element bool
    :obj:`condition` is false, without the host waiting for the device
    (on CUDA, the error arrives at the next synchronization)."""
    torch._assert_async(condition, message)
