from . import inits, models  # noqa: F401
from .conv import GATEConv
from .models import GATE

__all__ = [
    'GATEConv',
    'GATE',
]
