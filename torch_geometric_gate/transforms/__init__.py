from .one_hot_label_features import OneHotLabelFeatures
from .random_gat_labels import RandomGATLabels
from .random_labels import RandomLabels

__all__ = [
    'RandomGATLabels',
    'OneHotLabelFeatures',
    'RandomLabels',
]
