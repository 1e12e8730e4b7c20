r"""GATE graph attention for PyTorch Geometric.

Implements the layer of `"GATE: How to Keep Out Intrusive Neighbors"
<https://arxiv.org/abs/2406.00418>`_ (Mustafa & Burkholz, ICML 2024).
"""

__version__ = '0.2.0.dev0'

import torch_geometric_gate.datasets  # noqa: E402,F401
import torch_geometric_gate.nn  # noqa: E402,F401
import torch_geometric_gate.ops  # noqa: E402,F401
import torch_geometric_gate.transforms  # noqa: E402,F401
import torch_geometric_gate.utils  # noqa: E402,F401
from torch_geometric_gate.nn import GATEConv  # noqa: E402
from torch_geometric_gate.ops import attention_kernel  # noqa: E402

__all__ = [
    'GATEConv',
    'attention_kernel',
    '__version__',
]
