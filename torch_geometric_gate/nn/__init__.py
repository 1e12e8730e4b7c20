from . import inits, models
from .conv import GATEConv
from .models import GATE

__all__ = [
    'GATEConv',
    'GATE',
    'inits',
    'models',
]
