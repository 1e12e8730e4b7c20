r"""Time the segment maximum of a softmax's scores, as compiled code gets it.

Inductor has no lowering for a scatter with ``amax``, so under
:func:`torch.compile` PyG's ``softmax`` runs ATen's ``scatter_reduce_``
(``include_self=False``); torch-scatter's ``scatter_max`` is what eager PyG
runs where it is installed. ``index_add_`` (a scatter-sum, which Inductor
does lower) is the reference. Scores of shape ``[E, H]`` on the random graph
of ``benchmark/conv.py`` with 10^5 edges plus one self-loop per node, one
thread::

    python docs/source/_scripts/scatter_max.py
"""

import time

import torch

try:
    import torch_scatter
except ImportError:  # Optional accelerator.
    torch_scatter = None

torch.set_num_threads(1)
num_nodes, num_edges = 10_000, 109_949
gen = torch.Generator().manual_seed(0)
index = torch.randint(num_nodes, (num_edges,), generator=gen)


def median_ms(fn, *args, reps: int = 21) -> float:
    fn(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return 1e3 * sorted(times)[reps // 2]


def aten_max(src, expanded):
    out = src.new_zeros(num_nodes, src.size(1))
    out.scatter_reduce_(0, expanded, src, 'amax', include_self=False)


def torch_scatter_max(src):
    torch_scatter.scatter_max(src, index, 0, dim_size=num_nodes)


def scatter_sum(src):
    src.new_zeros(num_nodes, src.size(1)).index_add_(0, index, src)


print('heads | scatter_reduce_ amax | torch_scatter.scatter_max | index_add_')
for heads in (1, 8):
    src = torch.randn(num_edges, heads, generator=gen)
    expanded = index.view(-1, 1).expand_as(src)
    ts_ms = '-'
    if torch_scatter is not None:
        ts_ms = f'{median_ms(torch_scatter_max, src):.2f} ms'
    print(
        f'{heads} | {median_ms(aten_max, src, expanded):.2f} ms | {ts_ms} | '
        f'{median_ms(scatter_sum, src):.2f} ms'
    )
