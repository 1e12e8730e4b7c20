from .gate_conv_kernels import GATEConv

__all__ = [
    'GATEConv',
]
