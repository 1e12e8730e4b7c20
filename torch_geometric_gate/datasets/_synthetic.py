"""Shared pieces of the synthetic test-bed datasets (private)."""

import hashlib
import math
import numbers
import os
import os.path as osp
import re
import sys
import tempfile
from typing import Any, List, Sequence, Tuple, Type

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.data.dataset import files_exist

from torch_geometric_gate.utils._validation import as_int, as_real


def check_seed(seed) -> int:
    seed = as_int(seed, 'seed', 0)
    if seed >= 2**64:
        raise ValueError(
            f"'seed' must be below 2**64, the range of torch.Generator "
            f'(got {seed})'
        )
    return seed


# The most nodes of an ER graph: the indices of its N (N - 1) / 2 node pairs,
# and sums of a few of them, must fit in int64.
MAX_NODES = 2**31


def check_num_nodes(num_nodes) -> int:
    num_nodes = as_int(num_nodes, 'num_nodes', 1)
    if num_nodes > MAX_NODES:
        raise ValueError(
            f"'num_nodes' must be at most 2**31, so that the indices of the "
            f'node pairs fit in int64 (got {num_nodes})'
        )
    return num_nodes


def check_er_args(
    num_nodes, edge_prob, num_classes, split, seed
) -> Tuple[int, float, int, Tuple[float, float, float], int]:
    r"""Validates the arguments every synthetic ER dataset shares and returns
    them as Python numbers: :obj:`num_nodes`, :obj:`num_classes` and
    :obj:`seed` as ints (NumPy integers and 0-d tensors included),
    :obj:`edge_prob` and :obj:`split` as floats (:obj:`split` may be a
    1-D NumPy array or tensor)."""
    num_nodes = check_num_nodes(num_nodes)
    num_classes = as_int(num_classes, 'num_classes', 2)
    seed = check_seed(seed)
    if num_nodes < num_classes:
        raise ValueError(
            f"'num_nodes' ({num_nodes}) must be at least "
            f"'num_classes' ({num_classes})"
        )
    edge_prob = _check_probability(edge_prob)
    given = split
    if (
        isinstance(split, (np.ndarray, Tensor))
        and split.ndim == 1
        or isinstance(split, Sequence)
        and not isinstance(split, (str, bytes))
    ):
        split = [as_real(s) for s in split]  # Python or NumPy numbers
    if (
        not isinstance(split, list)
        or len(split) != 3
        or any(
            isinstance(s, bool) or not isinstance(s, numbers.Real)
            for s in split
        )
    ):
        raise ValueError(
            f"'split' must be three numbers (train, val, test) (got {given!r})"
        )
    if any(
        not (isinstance(s, numbers.Integral) or math.isfinite(s))
        for s in split
    ):
        raise ValueError(
            f"'split' must be three finite numbers (train, val, test), not "
            f'NaN or infinite (got {given})'
        )
    if any(not s >= 0 for s in split):
        raise ValueError(
            f"'split' must not have a negative part (got {given})"
        )
    if not math.isclose(sum(split), 1.0, abs_tol=1e-6):
        raise ValueError(
            f"'split' must sum to 1 (got {given}, which sums to {sum(split)})"
        )
    split = tuple(float(s) for s in split)
    return num_nodes, edge_prob, num_classes, split, seed


def fmt(value: float) -> str:
    r"""Formats a float exactly (shortest round-trip form) for a file name."""
    return repr(float(value))


def child_seeds(seed: int, num: int) -> List[int]:
    r"""Derives :obj:`num` independent 64-bit seeds from :obj:`seed`, one per
    random step, so that the streams of different steps never overlap."""
    children = np.random.SeedSequence(seed).spawn(num)
    return [int(c.generate_state(1, np.uint64)[0]) for c in children]


# `graph_method='auto'` draws the exact graphs of PyG's
# `erdos_renyi_graph` up to this many nodes (every result of this project
# so far, at N = 1000) and skips to the edges above it.
DENSE_MAX_NODES = 10_000
GRAPH_METHODS = ('auto', 'dense', 'sparse')
_CHUNK = 1 << 22  # uniforms per chunk of the dense draw (16 MB)


def check_graph_method(method) -> None:
    if method not in GRAPH_METHODS:
        raise ValueError(
            f"'graph_method' must be one of {GRAPH_METHODS} (got {method!r})"
        )


def resolve_graph_method(method: str, num_nodes: int) -> str:
    r"""The generator :obj:`method` stands for at :obj:`num_nodes` nodes:
    :obj:`'auto'` is :obj:`'dense'` up to :obj:`DENSE_MAX_NODES` nodes and
    :obj:`'sparse'` above."""
    check_graph_method(method)
    if method == 'auto':
        return 'dense' if num_nodes <= DENSE_MAX_NODES else 'sparse'
    return method


def er_graph(
    num_nodes: int, edge_prob: float, seed: int, method: str = 'dense'
) -> Tensor:
    r"""An undirected Erdős–Rényi graph :math:`G(N, p)` without self-loops,
    as a coalesced :obj:`edge_index` holding both directions of each edge,
    deterministic under :obj:`seed` (the caller's random state is left
    alone).

    :obj:`method='dense'` draws one uniform number per node pair
    :math:`i < j`, in the order of :func:`torch.combinations`, from a CPU
    generator seeded with :obj:`seed`: the graph of PyG's
    :func:`~torch_geometric.utils.erdos_renyi_graph` after
    :obj:`torch.default_generator.manual_seed(seed)`, bit for bit, but
    drawn in chunks, in :math:`O(N + |E|)` memory (PyG's needs
    :math:`O(N^2)`); its time is still :math:`O(N^2)`. As PyG's, it
    compares float32 uniforms with :math:`p`, so a :math:`p` below
    :math:`2^{-24}` (about :math:`6 \cdot 10^{-8}`) draws edges as
    :math:`2^{-24}` does: use :obj:`method='sparse'` there.
    :obj:`method='sparse'` skips from edge to edge (Batagelj and Brandes,
    "Efficient generation of large random networks", 2005): the gaps
    between consecutive edges in that order are geometric with parameter
    :math:`p`, so the graph has the same distribution in
    :math:`O(N + |E|)` time and memory, but it is a different draw.

    This is the graph of
    :class:`~torch_geometric_gate.datasets.SelfSufficientER` and
    :class:`~torch_geometric_gate.datasets.NeighborDependentER`.

    Args:
        num_nodes (int): The number of nodes :math:`N`, at most
            :math:`2^{31}`.
        edge_prob (float): The probability :math:`p` of each edge.
        seed (int): The seed of the draw, in :math:`[0, 2^{64})` (PyTorch's
            CPU generator reads its low 32 bits: seeds equal modulo
            :math:`2^{32}` draw alike).
        method (str, optional): :obj:`"dense"` or :obj:`"sparse"`.
            (default: :obj:`"dense"`)

    Example:
        >>> from torch_geometric_gate.datasets import er_graph
        >>> er_graph(5, 1.0, seed=0)
        tensor([[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4],
                [1, 2, 3, 4, 0, 2, 3, 4, 0, 1, 3, 4, 0, 1, 2, 4, 0, 1, 2, 3]])
    """
    num_nodes = check_num_nodes(num_nodes)
    seed = check_seed(seed)
    edge_prob = _check_probability(edge_prob)
    num_pairs = num_nodes * (num_nodes - 1) // 2
    gen = torch.Generator().manual_seed(seed)
    if method == 'dense':
        hits = []
        for start in range(0, num_pairs, _CHUNK):
            size = min(_CHUNK, num_pairs - start)
            mask = torch.rand(size, generator=gen) < edge_prob
            hits.append(mask.nonzero().view(-1) + start)
        index = torch.cat(hits) if hits else torch.empty(0, dtype=torch.long)
    elif method == 'sparse':
        index = _skip_pairs(num_pairs, edge_prob, gen)
    else:
        raise ValueError(
            f"'method' must be 'dense' or 'sparse' (got {method!r})"
        )
    row, col = _pair_of_index(index, num_nodes)
    return _undirected(row, col, num_nodes)


def _skip_pairs(num_pairs: int, edge_prob: float, gen) -> Tensor:
    r"""The sorted indices of the successes of :obj:`num_pairs` Bernoulli
    trials with probability :obj:`edge_prob`, from geometric gaps."""
    if num_pairs == 0 or edge_prob <= 0.0:
        return torch.empty(0, dtype=torch.long)
    if edge_prob >= 1.0:
        return torch.arange(num_pairs)
    log_q = math.log1p(-edge_prob)
    parts, last = [], -1  # `last`: the index of the latest success
    while True:
        mean = (num_pairs - 1 - last) * edge_prob
        size = int(mean + 6 * math.sqrt(mean) + 1024)
        u = torch.rand(size, dtype=torch.float64, generator=gen)
        # P(gap > g) = (1 - p)^g for 1 - u in (0, 1]; clamped, so that a
        # step is at most `num_pairs + 1`.
        gap = (torch.log1p(-u) / log_q).floor_().clamp_(max=num_pairs)
        steps = gap.long() + 1
        if last + size * (num_pairs + 2) >= 2**63:
            # Their sum may overflow int64 (over 10^16 pairs and a tiny
            # `edge_prob`). Only the steps up to the first past the last
            # pair count: cut after the first whose sum, in float64,
            # reaches 1.5 times the pairs (the int64 sum to there stays
            # below 3.5 * num_pairs < 2**63, as num_nodes <= 2**31).
            approx = steps.double().cumsum(0)
            cut = int(torch.searchsorted(approx, 1.5 * num_pairs)) + 1
            steps = steps[:cut]
        index = last + steps.cumsum(0)
        inside = int(torch.searchsorted(index, num_pairs))
        parts.append(index[:inside])
        if inside < size:
            return torch.cat(parts)
        last = int(index[-1])


def _pair_of_index(index: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor]:
    r"""The node pairs :math:`(i, j)`, :math:`i < j`, at the sorted
    positions :obj:`index` of the row-major order of
    :func:`torch.combinations`, in :math:`O(N + |E|)`."""
    i = torch.arange(num_nodes)
    offsets = i * (num_nodes - 1) - i * (i - 1) // 2  # first index of row i
    starts = torch.searchsorted(index, offsets)
    counts = torch.diff(starts, append=starts.new_tensor([index.numel()]))
    row = torch.repeat_interleave(i, counts)
    col = index - offsets[row] + row + 1
    return row, col


def _undirected(row: Tensor, col: Tensor, num_nodes: int) -> Tensor:
    r"""Both directions of the edges :math:`(i, j)`, :math:`i < j`, given
    sorted by :math:`(i, j)`, sorted by source then target (what
    :func:`~torch_geometric.utils.to_undirected` returns, without its
    sort of all :math:`2|E|` edges): for each node, the edges to its
    smaller neighbors (the reversed edges, sorted by target) come before
    those to its larger ones, so both lists land at increasing positions.
    """
    small = num_nodes <= torch.iinfo(torch.int32).max  # int32 sorts faster
    col_sorted, perm = torch.sort(col.int() if small else col, stable=True)
    col_sorted, row_by_col = col_sorted.long(), row[perm]
    lower = torch.bincount(col, minlength=num_nodes).cumsum(0)
    upper = torch.bincount(row, minlength=num_nodes).cumsum(0)
    upper = upper - torch.bincount(row, minlength=num_nodes)
    ar = torch.arange(row.numel())
    out = torch.empty(2, 2 * row.numel(), dtype=torch.long)
    pos = ar + upper[col_sorted]  # after the smaller nodes' edges
    out[0, pos], out[1, pos] = col_sorted, row_by_col
    pos = ar + lower[row]  # after the reversed edges up to this node
    out[0, pos], out[1, pos] = row, col
    return out


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


def check_root(root) -> str:
    r"""The dataset directory :obj:`root` as a string; :obj:`None` (which
    PyG would turn into a folder :obj:`'???'` in the working directory) and
    the empty string are refused."""
    if isinstance(root, os.PathLike):
        root = os.fspath(root)
    if not isinstance(root, str):
        raise TypeError(
            f"'root' must be a directory path (str or os.PathLike) where "
            f'the generated dataset is cached (got {root!r}); pass e.g. '
            f'tempfile.mkdtemp()'
        )
    if not root:
        raise ValueError(
            "'root' must be a directory path where the generated dataset is "
            "cached (got ''); pass e.g. tempfile.mkdtemp()"
        )
    return root


def atomic_torch_save(obj: Any, path: str) -> None:
    r""":func:`torch.save` to a new file in the folder of :obj:`path`, then
    :func:`os.replace` onto :obj:`path`: a reader sees the old file or the
    complete new one, never a partial one, and a writer that dies leaves
    no truncated file under :obj:`path`."""
    # (Created again: a failed construction in another process removes
    # the folder it created while it is still empty.)
    os.makedirs(osp.dirname(path) or '.', exist_ok=True)
    # A short name of its own (not `path` plus a suffix), so that a long but
    # legal file name cannot grow past the file system's 255 bytes:
    fd, tmp = tempfile.mkstemp(
        dir=osp.dirname(path) or '.', prefix='.', suffix='.tmp'
    )
    try:
        with os.fdopen(fd, 'wb') as f:
            torch.save(obj, f)
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise


def transform_key(transform: Any) -> str:
    r"""A representation of :obj:`transform` that is the same in every
    process: its :func:`repr` without memory addresses (PyG's record of a
    :obj:`pre_transform` also drops the rest of the text in angle brackets,
    so that every function reads :obj:`'<function>'`; here a function keeps
    its qualified name)."""
    return re.sub(r' at 0x[0-9a-fA-F]+', '', repr(transform))


class SyntheticDataset(InMemoryDataset):
    r"""What the synthetic datasets share (private): the :obj:`root` check,
    :obj:`num_classes` as the argument :math:`C`, the :obj:`pre_transform`
    in the processed file name (:meth:`pre_transform_tag`), atomic writes
    of the processed files and a clear error for an unreadable one. A
    subclass sets :obj:`_num_classes` and its other attributes, ends its
    :obj:`processed_file_names` with :meth:`pre_transform_tag`, then calls
    :meth:`__init__`, which processes (if needed) and loads."""

    def __init__(self, root, transform, pre_transform, force_reload, log):
        super().__init__(
            check_root(root),
            transform,
            pre_transform,
            log=log,
            force_reload=force_reload,
        )
        self.load(self.processed_paths[0])

    @property
    def num_classes(self) -> int:
        r"""The number of classes :math:`C` the labels are drawn from (the
        :obj:`num_classes` argument), also when a small graph draws no node
        of some class (PyG's default counts the classes present). A
        :obj:`transform` or :obj:`pre_transform` that gives labels of more
        classes (e.g. :class:`~torch_geometric_gate.transforms.RandomLabels`)
        raises it to their count, as in PyG."""
        if self.transform is None and self.pre_transform is None:
            return self._num_classes
        return max(self._num_classes, super().num_classes)

    def pre_transform_tag(self) -> str:
        r"""The end of the processed file name that stands for
        :obj:`pre_transform`: :obj:`'_pre-none'` without one, else
        :obj:`'_pre-'` and a hash of its :func:`transform_key`.

        All parameter sets share one :obj:`processed` folder, where PyG's
        single record of the :obj:`pre_transform` (:obj:`pre_transform.pt`)
        compared each file with the :obj:`pre_transform` of whichever file
        was processed last: a file built with another :obj:`pre_transform`
        could be reused without a warning. Named by it, it is not, as far
        as the :func:`repr` tells transforms apart (a change it does not
        show needs :obj:`force_reload=True`; the names before this tag,
        which did not record the :obj:`pre_transform`, are not read)."""
        if self.pre_transform is None:
            return '_pre-none'
        key = transform_key(self.pre_transform).encode()
        return f'_pre-{hashlib.sha256(key).hexdigest()[:16]}'

    @classmethod
    def save(cls, data_list: Sequence[Data], path: str) -> None:
        r"""Saves like :meth:`InMemoryDataset.save`, atomically."""
        data, slices = cls.collate(data_list)
        atomic_torch_save((data.to_dict(), slices, data.__class__), path)

    def load(self, path: str, data_cls: Type[Data] = Data) -> None:
        r"""Loads like :meth:`InMemoryDataset.load`; an unreadable file
        raises one :class:`RuntimeError` that names it."""
        try:
            super().load(path, data_cls)
        except Exception as e:
            raise RuntimeError(
                f"The processed file '{path}' cannot be read "
                f'({type(e).__name__}: {e}); it is corrupted or incomplete. '
                f"Pass 'force_reload=True' to rebuild it."
            ) from e

    def _process(self) -> None:
        # `Dataset._process` of PyG 2.8, with the file written atomically
        # (in place, a concurrent reader could load a partial file) and
        # without the folder's `pre_transform.pt` and `pre_filter.pt`: the
        # processed file name holds the `pre_transform` (see
        # `pre_transform_tag`), and there is no `pre_filter`.
        if not self.force_reload and files_exist(self.processed_paths):
            return
        log = self.log and 'PYTEST_CURRENT_TEST' not in os.environ
        if log:
            print('Processing...', file=sys.stderr)
        created = make_dirs(self.processed_dir)
        try:
            self.process()
        except BaseException:
            # Invalid arguments leave nothing under `root`; neither does a
            # failure here (but what other calls put there):
            remove_empty_dirs(created)
            raise
        if log:
            print('Done!', file=sys.stderr)


def make_dirs(path: str) -> List[str]:
    r"""Creates the folder :obj:`path` and its missing parents, as
    :func:`os.makedirs`, and returns the folders this call created,
    deepest first."""
    missing, parent = [], osp.abspath(path)
    while not osp.exists(parent):
        missing.append(parent)
        parent = osp.dirname(parent)
    created = []
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:  # another process was faster
            continue
        created.append(folder)
    os.makedirs(path, exist_ok=True)  # raises if `path` is a file
    return created[::-1]


def remove_empty_dirs(folders: List[str]) -> None:
    r"""Removes :obj:`folders`, deepest first, up to the first that is not
    empty (another process wrote to it)."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return


def _check_probability(edge_prob) -> float:
    edge_prob = as_real(edge_prob)
    if (
        isinstance(edge_prob, bool)
        or not isinstance(edge_prob, numbers.Real)
        or not 0.0 <= edge_prob <= 1.0
    ):
        raise ValueError(
            f"'edge_prob' must be a probability in [0, 1] (got {edge_prob!r})"
        )
    return float(edge_prob)
