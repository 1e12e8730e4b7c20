from ._synthetic import er_graph
from .neighbor_dependent_er import NeighborDependentER
from .self_sufficient_er import SelfSufficientER

__all__ = [
    'SelfSufficientER',
    'NeighborDependentER',
    'er_graph',
]
