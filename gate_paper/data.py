r"""The data of the paper's scripts: the real graphs through PyG's own
dataset classes under a data root (``data/`` by default, as in PyG's
examples; ``GATE_DATA_ROOT`` overrides), downloaded on first use; the
authors' synthetic graphs from their ``.npz`` files; and the checked
train/validation/test splits.

A download that fails (no network) is a :class:`FileNotFoundError` naming
the dataset, the files expected under the root and how to point the root
at a local copy; it leaves nothing behind: files are downloaded into a
temporary folder and moved into place only once all of them are complete.
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import zipfile
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

import numpy as np

# torch and PyG load in the functions that use them: a script's argument
# parsing does not wait for them.
if TYPE_CHECKING:
    from torch import Tensor
    from torch_geometric.data import Data

HETEROPHILOUS = (
    'Roman-empire',
    'Amazon-ratings',
    'Minesweeper',
    'Tolokers',
    'Questions',
)
SMALL = ('Cora', 'CiteSeer', 'Texas', 'Wisconsin', 'Actor')
DATASETS = HETEROPHILOUS + SMALL
ROC_AUC_DATASETS = ('Minesweeper', 'Tolokers', 'Questions')
#: The datasets whose graphs PyG's classes give directed, with self-loops
#: (WebKB's and Actor's edges are hyperlinks): :func:`load_dataset` makes
#: them undirected without loops, the graphs of the paper's Table 6.
HYPERLINKS = ('Texas', 'Wisconsin', 'Actor')
#: The environment variable that overrides the default data root.
DATA_ROOT_ENV = 'GATE_DATA_ROOT'
# PyG's progress lines, left out:
QUIET = ('Downloading ', 'Processing...', 'Done!')
# The folder of each dataset's PyG root under a data root.
SUBDIR = {
    'Cora': 'Planetoid',
    'CiteSeer': 'Planetoid',
    'Texas': 'WebKB',
    'Wisconsin': 'WebKB',
    'Actor': 'Actor',
    **{name: 'heterophilous' for name in HETEROPHILOUS},
}


def default_root() -> str:
    r"""The data root: ``$GATE_DATA_ROOT``, else ``data`` (relative to the
    working directory, as in PyG's examples)."""
    return os.environ.get(DATA_ROOT_ENV) or 'data'


def raw_files(name: str) -> Sequence[str]:
    r"""The raw files PyG's class reads for dataset ``name``, relative to
    the data root."""
    if name not in DATASETS:
        raise ValueError(
            f'unknown dataset {name!r}; expected one of {DATASETS}'
        )
    sub = SUBDIR[name]
    if name in ('Cora', 'CiteSeer'):
        parts = ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index')
        raw = os.path.join(sub, name, 'raw')
        return [os.path.join(raw, f'ind.{name.lower()}.{p}') for p in parts]
    if name in HETEROPHILOUS:
        stem = name.lower().replace('-', '_')
        return [os.path.join(sub, stem, 'raw', f'{stem}.npz')]
    if name == 'Actor':
        raw, split = os.path.join(sub, 'raw'), 'film'
    else:
        raw, split = os.path.join(sub, name.lower(), 'raw'), name.lower()
    names = ['out1_node_feature_label.txt', 'out1_graph_edges.txt']
    names += [f'{split}_split_0.6_0.2_{i}.npz' for i in range(10)]
    return [os.path.join(raw, n) for n in names]


def pyg_dataset(name: str, root: str, transform=None):
    r"""PyG's dataset ``name`` under the data root ``root`` (its class's
    root is ``root/Planetoid``, ``root/WebKB``, ...; nothing is checked or
    cleaned up here, see :func:`fetch`), with ``transform`` applied at
    every access (whatever the dataset's class), without
    the "Downloading ...", "Processing..." and "Done!" lines PyG prints to
    stderr (these classes take no ``log`` argument); anything else it
    prints is passed on."""
    from torch_geometric.datasets import (
        Actor,
        HeterophilousGraphDataset,
        Planetoid,
        WebKB,
    )

    path, err = os.path.join(root, SUBDIR[name]), io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            if name in HETEROPHILOUS:
                return HeterophilousGraphDataset(
                    path, name, transform=transform
                )
            if name in ('Cora', 'CiteSeer'):
                return Planetoid(path, name, transform=transform)
            if name == 'Actor':
                return Actor(path, transform=transform)
            return WebKB(path, name, transform=transform)
    finally:
        for line in err.getvalue().splitlines(keepends=True):
            if not line.startswith(QUIET):
                sys.stderr.write(line)


def _first_missing(path: str) -> Optional[str]:
    r"""The outermost folder of ``path`` (itself included) that does not
    exist yet, or :obj:`None`."""
    path, missing = os.path.abspath(path), None
    while not os.path.isdir(path):
        missing, parent = path, os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


@contextlib.contextmanager
def staging(root: str):
    r"""A temporary folder under ``root`` (created if needed) to download
    into, removed on leaving; on an error (or Ctrl-C) so is every folder
    that creating ``root`` made."""
    created = _first_missing(root)
    try:
        os.makedirs(root, exist_ok=True)
        folder = tempfile.mkdtemp(prefix='.download-', dir=root)
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def fetch(names: Sequence[str], root: str):
    r"""Makes sure ``root`` holds the raw files of every dataset of
    ``names``: those it lacks are downloaded by PyG's own class into a
    temporary folder under ``root`` (:func:`staging`) and moved into place
    once all are complete. A failed download is a
    :class:`FileNotFoundError` naming the dataset, the files expected and
    how to point the root at a copy; nothing it created is left behind."""
    for name in names:
        files = raw_files(name)
        missing = [
            f for f in files if not os.path.isfile(os.path.join(root, f))
        ]
        if not missing:
            continue
        try:
            with staging(root) as folder:
                pyg_dataset(name, folder)
                for f in missing:
                    path = os.path.join(root, f)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    os.replace(os.path.join(folder, f), path)
        except OSError as e:  # URLError, aiohttp's errors, HTTP 404, ...
            shown = ', '.join(files[:3])
            if len(files) > 3:
                shown += f' and {len(files) - 3} more'
            raise FileNotFoundError(
                f'could not download {name} ({type(e).__name__}: {e}); '
                f'expected its raw files under the data root {root!r}: '
                f'{shown}. Without network, copy them there from '
                f"a local copy (the layout of PyG's dataset classes), or "
                f'point the data root (--data-root, or the environment '
                f'variable {DATA_ROOT_ENV}) at a folder that holds them'
            ) from e


def edges_of(name: str, raw_edges: bool = False) -> str:
    r"""The edges of dataset ``name`` as :func:`load_dataset` gives them
    (a run configuration's ``edges``): ``'raw'`` for a heterophilous set's
    raw file (``raw_edges=True``; other datasets have no other), else
    ``'undirected'``."""
    if raw_edges and name in HETEROPHILOUS:
        return 'raw'
    return 'undirected'


def load_dataset(
    name: str, root: str, raw_edges: bool = False, normalize: bool = True
) -> Tuple['Data', int]:
    r"""Returns ``(data, num_classes)`` of dataset ``name`` with PyG's own
    class under the data root ``root`` (``Planetoid/``, ``WebKB/``,
    ``Actor/``, ``heterophilous/``), downloaded first if missing
    (:func:`fetch`). ``data.train_mask`` etc. are
    ``[num_nodes, num_splits]``. With ``raw_edges=True`` a heterophilous
    graph keeps the edges of its raw file (each edge once, one direction, as
    the authors' scripts used them) instead of PyG's undirected graph.
    Texas, Wisconsin and Actor (:obj:`HYPERLINKS`) come undirected without
    self-loops, each edge of the paper's Table 6 in both directions (PyG's
    hyperlink graphs are directed and have self-loops). Planetoid features
    are row-normalised (``NormalizeFeatures``) unless ``normalize=False``:
    the input Dirichlet energies of the paper's
    Appendix C are those of the normalised features.
    """
    import torch
    from torch_geometric.transforms import NormalizeFeatures
    from torch_geometric.utils import remove_self_loops, to_undirected

    fetch([name], root)
    planetoid = name in ('Cora', 'CiteSeer')
    transform = NormalizeFeatures() if normalize and planetoid else None
    dataset = pyg_dataset(name, root, transform)
    data = dataset[0]
    if data.train_mask.dim() == 1:  # Planetoid: one public split
        for key in ('train_mask', 'val_mask', 'test_mask'):
            data[key] = data[key].view(-1, 1)
    if raw_edges and name in HETEROPHILOUS:
        raw = np.load(dataset.raw_paths[0])
        data.edge_index = torch.from_numpy(raw['edges']).t().contiguous()
    if name in HYPERLINKS:
        edge_index, _ = remove_self_loops(data.edge_index)
        data.edge_index = to_undirected(edge_index, num_nodes=data.num_nodes)
    return data, dataset.num_classes


def load_npz(path: str, keys: Sequence[str]) -> Dict[str, np.ndarray]:
    r"""The arrays ``keys`` of the ``.npz`` file ``path``; a
    :class:`ValueError` naming the file if it is missing, unreadable or
    lacks one of them."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f'no such .npz file: {path!r}')
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [k for k in keys if k not in arrays.files]
            if missing:
                raise ValueError(
                    f'{path!r} lacks the arrays {missing}; expected '
                    f'{list(keys)}, it holds {arrays.files}'
                )
            return {k: arrays[k] for k in keys}
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(
            f'{path!r} is not a readable .npz file of arrays {list(keys)} '
            f'({type(e).__name__}: {e})'
        ) from None
    except ValueError as e:
        if 'pickle' in str(e) or 'allow_pickle' in str(e):
            raise ValueError(
                f'{path!r} is not a readable .npz file of arrays '
                f'{list(keys)} (it holds pickled objects or is corrupted)'
            ) from None
        raise


def check_masks(
    train: 'Tensor', val: 'Tensor', test: 'Tensor', where: str
) -> Tuple['Tensor', 'Tensor', 'Tensor']:
    r"""The masks as booleans; a :class:`ValueError` naming ``where`` if
    two of them share a node or one is empty, so that no test node is ever
    trained on."""
    train, val, test = train.bool(), val.bool(), test.bool()
    for (a, b), name in (
        ((train, test), 'training and test'),
        ((train, val), 'training and validation'),
        ((val, test), 'validation and test'),
    ):
        if bool((a & b).any()):
            raise ValueError(
                f'{where}: {int((a & b).sum())} nodes are in both the '
                f'{name} masks'
            )
    if not bool(train.any()) or not bool(val.any()) or not bool(test.any()):
        raise ValueError(f'{where} has an empty mask')
    return train, val, test


def split_masks(
    data, split: int, both_classes: bool = False
) -> Tuple['Tensor', 'Tensor', 'Tensor']:
    r"""The train, validation and test masks of split ``split`` (a
    dataset with one split, Planetoid's public one, serves every split
    index). Raises a :class:`ValueError` if the split does not exist or its
    masks overlap (:func:`check_masks`), and with ``both_classes=True``
    (ROC AUC) if the validation or test nodes hold one class only.
    """
    num_splits = data.train_mask.size(1)
    if num_splits == 1:
        column = 0
    elif 0 <= split < num_splits:
        column = split
    else:
        raise ValueError(
            f'split {split} does not exist; the dataset has {num_splits} '
            f'splits (0 to {num_splits - 1})'
        )
    train, val, test = check_masks(
        *(data[k][:, column] for k in ('train_mask', 'val_mask', 'test_mask')),
        where=f'split {split}',
    )
    if both_classes:  # ROC AUC: selection and test need both classes
        for mask, name in ((val, 'validation'), (test, 'test')):
            present = data.y[mask].unique().tolist()
            if len(present) < 2:
                raise ValueError(
                    f'split {split}: the {name} nodes hold only class '
                    f'{present[0]}, so their ROC AUC is undefined; a ROC '
                    f'AUC dataset needs both classes in every {name} mask'
                )
    return train, val, test


GRAPH_ARRAYS = ('x', 'edge_index', 'y', 'train_mask', 'val_mask', 'test_mask')
# What each array of an .npz graph may hold (numpy's dtype kinds: b bool, i
# signed, u unsigned integers, f floats) and the dtype the models get.
GRAPH_DTYPES = {
    'x': ('biuf', np.float32, 'numbers'),
    'edge_index': ('iu', np.int64, 'integers'),
    'y': ('iu', np.int64, 'integers'),
    **{
        k: ('biu', np.bool_, 'booleans or 0/1 integers')
        for k in ('train_mask', 'val_mask', 'test_mask')
    },
}


def npz_graph(path: str) -> 'Data':
    r"""A graph with one split from the ``.npz`` file ``path`` (arrays
    ``x``, ``edge_index``, ``y``, ``train_mask``, ``val_mask``,
    ``test_mask``: the authors' synthetic graphs), its masks checked.
    ``x`` becomes float32 (the models' dtype), ``edge_index`` and ``y``
    int64, the masks booleans; an array of another kind (``y`` of floats,
    say) is a :class:`ValueError` naming the file, the array and the kinds
    expected."""
    import torch
    from torch_geometric.data import Data

    arrays = load_npz(path, GRAPH_ARRAYS)
    for key, (kinds, dtype, what) in GRAPH_DTYPES.items():
        if arrays[key].dtype.kind not in kinds:
            raise ValueError(
                f'{path!r}: the array {key!r} must hold {what} (it becomes '
                f'{np.dtype(dtype).name}), got {arrays[key].dtype}'
            )
        arrays[key] = arrays[key].astype(dtype, copy=False)
    data = Data(**{k: torch.from_numpy(v) for k, v in arrays.items()})
    check_masks(data.train_mask, data.val_mask, data.test_mask, repr(path))
    return data


def graph_digest(data: 'Data') -> str:
    r"""The SHA-256 (hex) of the arrays of an :func:`npz_graph` graph as
    the models get them (name, dtype, shape and bytes of each): the same
    graphs give the same digest however the file was written."""
    import hashlib

    digest = hashlib.sha256()
    for key in GRAPH_ARRAYS:
        array = data[key].numpy()
        digest.update(f'{key} {array.dtype.str} {array.shape}\n'.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
