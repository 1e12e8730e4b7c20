r"""Would a native segment maximum pay off? A C++ loop against ATen's.

The softmax of a compiled GATEConv step needs the maximum score per target
node and head. Inductor has no lowering for it, so compiled code calls
ATen's ``scatter_reduce_`` with ``amax``, which costs 7-8x more with 8 heads
than with one (``benchmark/compile_parts.py``). This script builds a plain
C++ loop over the edges with :func:`torch.utils.cpp_extension.load_inline`
(a C++ compiler and ``ninja`` needed; the first build takes about a minute)
and times both on the scores of a random graph, one thread, after checking
that they agree. It is a measurement for the benchmark page, not part of
the package::

    OMP_NUM_THREADS=1 python benchmark/native_segment_max.py
"""

import argparse
import os
import sys
from functools import partial

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_parts import median_ms  # noqa: E402

SOURCE = r"""
#include <torch/extension.h>
#include <limits>

torch::Tensor segment_max(torch::Tensor e, torch::Tensor index,
                          int64_t num_nodes) {
  TORCH_CHECK(e.dim() == 2 && e.is_contiguous() && !e.is_cuda());
  TORCH_CHECK(index.scalar_type() == torch::kLong &&
              index.numel() == e.size(0));
  const int64_t num_edges = e.size(0), heads = e.size(1);
  auto out = torch::full({num_nodes, heads},
                         -std::numeric_limits<float>::infinity(), e.options());
  AT_DISPATCH_FLOATING_TYPES(e.scalar_type(), "segment_max", [&] {
    const scalar_t* src = e.data_ptr<scalar_t>();
    const int64_t* idx = index.data_ptr<int64_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < num_edges; ++i) {
      const int64_t node = idx[i];
      TORCH_CHECK(node >= 0 && node < num_nodes, "index out of range");
      scalar_t* row = dst + node * heads;
      const scalar_t* value = src + i * heads;
      for (int64_t h = 0; h < heads; ++h) {
        row[h] = value[h] > row[h] ? value[h] : row[h];
      }
    }
  });
  return out;
}
"""


def aten_max(e, expanded, num_nodes: int):
    out = e.new_zeros(num_nodes, e.size(1))
    return out.scatter_reduce_(0, expanded, e, 'amax', include_self=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--edges', type=int, nargs='+', default=[109_949, 1_049_758]
    )
    parser.add_argument(
        '--nodes', type=int, nargs='+', default=[10_000, 11_758]
    )
    parser.add_argument('--heads', type=int, nargs='+', default=[1, 8])
    parser.add_argument('--reps', type=int, default=21)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    native = load_inline(
        'gate_segment_max',
        cpp_sources=SOURCE,
        functions=['segment_max'],
        extra_cflags=['-O3'],
    )
    print(
        '| edges | nodes | heads | ATen scatter_reduce_ amax ms '
        '| C++ loop ms | ATen / C++ |'
    )
    print('|---|---|---|---|---|---|')
    gen = torch.Generator().manual_seed(0)
    for num_edges, num_nodes in zip(args.edges, args.nodes):
        index = torch.randint(num_nodes, (num_edges,), generator=gen)
        for heads in args.heads:
            e = torch.randn(num_edges, heads, generator=gen)
            expanded = index.view(-1, 1).expand_as(e)

            aten = partial(aten_max, e, expanded, num_nodes)
            cpp = partial(native.segment_max, e, index, num_nodes)

            hit = torch.zeros(num_nodes, dtype=torch.bool)
            hit[index] = True
            assert torch.equal(aten()[hit], cpp()[hit])
            aten_ms = median_ms(aten, args.reps)
            cpp_ms = median_ms(cpp, args.reps)
            print(
                f'| {num_edges} | {num_nodes} | {heads} | {aten_ms:.2f} | '
                f'{cpp_ms:.2f} | {aten_ms / cpp_ms:.1f} |'
            )


if __name__ == '__main__':
    main()
