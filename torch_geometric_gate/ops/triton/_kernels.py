r"""The :func:`triton.jit` kernels behind
:mod:`torch_geometric_gate.ops.triton` (imported only when that module
runs them, so that importing the package never needs Triton).

Layout: every node tensor is :obj:`[N, H, C]`, each row's :obj:`H x C` values
contiguous (the projections' rows :obj:`q_stride` apart, the others' :obj:`H *
C`), loaded as an :obj:`[H_PAD, C_PAD]` tile (powers of two, masked); a block
of :obj:`BLOCK_E` edges is an :obj:`[BLOCK_E, H_PAD, C_PAD]` tile. Edges are
visited in CSR order (sorted by target): :obj:`src_s`, :obj:`dst_s` and
:obj:`kind_s` are the source, the target and the kind of the edge at each CSR
position (bit 0: a self-loop, scored with :math:`\mathbf{a}_t`; bit 1: masked).
Row offsets are computed in int64 (:obj:`E * H * C` may pass :math:`2^{31}`).

The dropout mask of the edge at CSR position :obj:`p` and head :obj:`h` is
:obj:`tl.rand(seed, p * H + h) >= p_drop`, drawn alike in every kernel from
the seed at :obj:`seed_ptr` (device memory, read only with dropout).
"""

from ._backward import (
    gate_att_grad_kernel,
    gate_bwd_combine_kernel,
    gate_bwd_dst_kernel,
    gate_bwd_dst_rec_kernel,
    gate_bwd_src_combine_kernel,
    gate_bwd_src_kernel,
    gate_bwd_src_rec_kernel,
)
from ._csr_kernels import (
    gate_csr_kernel,
    gate_merge_csr_kernel,
    gate_merge_rev_kernel,
    gate_rev_pos_kernel,
    gate_seg_count_kernel,
    gate_seg_node_kernel,
)
from ._forward import (
    gate_alpha_kernel,
    gate_combine_kernel,
    gate_fwd_kernel,
    gate_keep_kernel,
    gate_loop_alpha_kernel,
)
from ._one_head import (
    gate_bwd_dst_1h_kernel,
    gate_bwd_src_1h_kernel,
    gate_fwd_1h_kernel,
)

__all__ = [
    'gate_alpha_kernel',
    'gate_att_grad_kernel',
    'gate_bwd_combine_kernel',
    'gate_bwd_dst_1h_kernel',
    'gate_bwd_dst_kernel',
    'gate_bwd_dst_rec_kernel',
    'gate_bwd_src_1h_kernel',
    'gate_bwd_src_combine_kernel',
    'gate_bwd_src_kernel',
    'gate_bwd_src_rec_kernel',
    'gate_combine_kernel',
    'gate_csr_kernel',
    'gate_fwd_1h_kernel',
    'gate_fwd_kernel',
    'gate_keep_kernel',
    'gate_loop_alpha_kernel',
    'gate_merge_csr_kernel',
    'gate_merge_rev_kernel',
    'gate_rev_pos_kernel',
    'gate_seg_count_kernel',
    'gate_seg_node_kernel',
]
