"""Shared pieces of the synthetic test-bed datasets (private)."""

import math
import numbers
from typing import List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor
from torch_geometric.utils import erdos_renyi_graph


def check_int(value, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"'{name}' must be an int (got {value!r})")
    if value < minimum:
        raise ValueError(f"'{name}' must be at least {minimum} (got {value})")


def check_er_args(
    num_nodes, edge_prob, num_classes, split, seed
) -> Tuple[float, Tuple[float, float, float]]:
    r"""Validates the arguments every synthetic ER dataset shares and returns
    :obj:`edge_prob` and :obj:`split` as floats."""
    check_int(num_nodes, 'num_nodes', 1)
    check_int(num_classes, 'num_classes', 2)
    check_int(seed, 'seed', 0)
    if num_nodes < num_classes:
        raise ValueError(
            f"'num_nodes' ({num_nodes}) must be at least "
            f"'num_classes' ({num_classes})"
        )
    if (
        isinstance(edge_prob, bool)
        or not isinstance(edge_prob, numbers.Real)
        or not 0.0 <= edge_prob <= 1.0
    ):
        raise ValueError(
            f"'edge_prob' must be a probability in [0, 1] (got {edge_prob!r})"
        )
    if (
        isinstance(split, (str, bytes))
        or not isinstance(split, Sequence)
        or len(split) != 3
        or any(
            isinstance(s, bool) or not isinstance(s, numbers.Real)
            for s in split
        )
    ):
        raise ValueError(
            f"'split' must be three numbers (train, val, test) (got {split!r})"
        )
    if any(not s >= 0 for s in split):
        raise ValueError(
            f"'split' must not have a negative part (got {split})"
        )
    if not math.isclose(sum(split), 1.0, abs_tol=1e-6):
        raise ValueError(
            f"'split' must sum to 1 (got {split}, which sums to {sum(split)})"
        )
    return float(edge_prob), tuple(float(s) for s in split)


def fmt(value: float) -> str:
    r"""Formats a float exactly (shortest round-trip form) for a file name."""
    return repr(float(value))


def child_seeds(seed: int, num: int) -> List[int]:
    r"""Derives :obj:`num` independent 64-bit seeds from :obj:`seed`, one per
    random step, so that the streams of different steps never overlap."""
    children = np.random.SeedSequence(seed).spawn(num)
    return [int(c.generate_state(1, np.uint64)[0]) for c in children]


def er_graph(num_nodes: int, edge_prob: float, seed: int) -> Tensor:
    r"""PyG's :func:`~torch_geometric.utils.erdos_renyi_graph` (undirected,
    no self-loops), made deterministic under :obj:`seed` without touching the
    caller's random state: it draws from the global CPU generator, so that
    generator is seeded inside :func:`torch.random.fork_rng`, which restores
    its state on exit. Only the CPU generator is seeded (not
    :func:`torch.manual_seed`, which would also reseed CUDA)."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return erdos_renyi_graph(num_nodes, edge_prob, directed=False)


def split_masks(
    num_nodes: int, split: Tuple[float, float, float], seed: int
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Disjoint, covering boolean masks for a random permutation of the
    nodes: the first :obj:`round(split[0] * N)` are training nodes, up to
    :obj:`round((split[0] + split[1]) * N)` validation nodes, the rest test
    nodes (2:1:1 of 1000 nodes gives 500/250/250)."""
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(num_nodes, generator=gen)
    n_train = min(round(split[0] * num_nodes), num_nodes)
    n_train_val = round((split[0] + split[1]) * num_nodes)
    n_train_val = min(max(n_train, n_train_val), num_nodes)
    masks = []
    for lo, hi in (
        (0, n_train),
        (n_train, n_train_val),
        (n_train_val, num_nodes),
    ):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[perm[lo:hi]] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]
