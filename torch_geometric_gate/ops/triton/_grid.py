r"""Launch geometry shared by the host side of the Triton kernels
(:mod:`._csr`, :mod:`._launch`): block counts, powers of two, and the
device a launch goes to."""

import contextlib

import torch


def pow2(n: int) -> int:
    r"""The smallest power of two at least :obj:`n` (1 for :obj:`n <= 1`)."""
    return 1 << max(n - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    r""":math:`\lceil a / b \rceil`."""
    return -(-a // b)


def on_device(device: torch.device):
    r"""Launches go to the tensors' CUDA device, not the current one."""
    if device.type == 'cuda':
        return torch.cuda.device(device)
    return contextlib.nullcontext()
