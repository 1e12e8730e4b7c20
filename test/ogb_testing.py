r"""A graph written in ogbn-arxiv's on-disk layout, for the tests of the OGB
example and of the paper's OGB script (no OGB data is available offline)."""

import gzip
import os
import os.path as osp


def _csv(path, rows):
    os.makedirs(osp.dirname(path), exist_ok=True)
    with gzip.open(path, 'wt') as f:
        for row in rows:
            if isinstance(row, (list, tuple)):
                f.write(','.join(str(v) for v in row) + '\n')
            else:
                f.write(f'{row}\n')


def write_arxiv(root, x, y, edge_index, splits):
    r"""Writes :obj:`x`, :obj:`y`, :obj:`edge_index` and the
    :obj:`(train, valid, test)` index tensors as
    :obj:`root/ogbn_arxiv/`: what :class:`PygNodePropPredDataset` reads
    without downloading (the raw files, the split and the release
    marker)."""
    base = osp.join(root, 'ogbn_arxiv')
    raw = osp.join(base, 'raw')
    _csv(osp.join(raw, 'edge.csv.gz'), edge_index.t().tolist())
    _csv(osp.join(raw, 'node-feat.csv.gz'), x.tolist())
    _csv(osp.join(raw, 'node-label.csv.gz'), y.tolist())
    _csv(osp.join(raw, 'node_year.csv.gz'), [2020] * x.size(0))
    _csv(osp.join(raw, 'num-node-list.csv.gz'), [x.size(0)])
    _csv(osp.join(raw, 'num-edge-list.csv.gz'), [edge_index.size(1)])
    for name, idx in zip(('train', 'valid', 'test'), splits):
        _csv(osp.join(base, 'split', 'time', f'{name}.csv.gz'), idx.tolist())
    open(osp.join(base, 'RELEASE_v1.txt'), 'w').close()
