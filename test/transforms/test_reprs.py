import inspect

import pytest
import torch

import torch_geometric_gate.transforms as transforms

# For every transform of the package, each parameter with two values that
# must give two reprs: the synthetic datasets name their processed file by
# the repr of their `pre_transform`, so a parameter the repr hides would
# reuse a file built with the other value.
VALUES = {
    'OneHotLabelFeatures': {
        'num_classes': (2, 3),
        'dtype': (torch.float32, torch.float64),
    },
    'RandomLabels': {'num_classes': (2, 3), 'seed': (0, 1)},
    'RandomGATLabels': {
        'num_layers': (1, 2),
        'num_classes': (2, 3),
        'seed': (0, 1),
        'act': ('elu', 'relu'),
        'negative_slope': (0.2, 0.0),
        'init': ('xavier_uniform', 'torch_default'),
        'n_init': (10, 1),
    },
}


def test_every_transform_is_covered():
    assert sorted(VALUES) == sorted(transforms.__all__)
    for name, values in VALUES.items():
        params = inspect.signature(getattr(transforms, name)).parameters
        assert sorted(values) == sorted(params)


@pytest.mark.parametrize('name', sorted(VALUES))
def test_repr_shows_every_parameter(name):
    cls, values = getattr(transforms, name), VALUES[name]
    base = {key: value for key, (value, _) in values.items()}
    for key, (_, other) in values.items():
        changed = cls(**{**base, key: other})
        assert repr(changed) != repr(cls(**base)), key
        assert repr(other) in repr(changed) or str(other) in repr(changed)
