from .gate import GATE

__all__ = [
    'GATE',
]
