from .conv import GATEConv

__all__ = [
    'GATEConv',
]
