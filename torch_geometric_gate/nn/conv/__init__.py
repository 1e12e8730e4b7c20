from .gate_conv import GATEConv

__all__ = [
    'GATEConv',
]
