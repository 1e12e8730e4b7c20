from typing import Optional

import torch
from torch import Tensor

from torch_geometric_gate.utils._validation import check_edge_index


def dirichlet_energy(x: Tensor, edge_index: Optional[Tensor] = None) -> Tensor:
    r"""Returns the Dirichlet energy of the node features :obj:`x`, the
    over-smoothing measure of the GATE paper's Appendix C, over all node
    pairs (:obj:`edge_index=None`) or over adjacent pairs.

    .. math::
        E_{\textrm{all}}(\mathbf{X}) = \frac{1}{2} \sum_{i, j \in
        \mathcal{V}} \| \mathbf{x}_i - \mathbf{x}_j \|^2, \qquad
        E_{\textrm{adj}}(\mathbf{X}) = \frac{1}{2} \sum_{(i, j) \in
        \mathcal{E}} \| \mathbf{x}_i - \mathbf{x}_j \|^2.

    This is the normalisation the authors' scripts used ("plain Dirichlet
    energy :math:`\frac{1}{2} \sum \|\mathbf{x}_i - \mathbf{x}_j\|^2`"): the
    sum runs over *ordered* pairs, so :math:`E_{\textrm{all}}` is the sum
    over unordered pairs, and for an undirected graph that stores every edge
    in both directions :math:`E_{\textrm{adj}}` is the sum over its
    undirected edges (self-loops contribute nothing). No degree
    normalisation and no division by the number of pairs are applied; the
    energy is translation invariant and scales with the square of the
    features. The paper's text says it uses the modification of the
    Dirichlet energy proposed for GATs by Eliasof et al. (:math:`\omega`\ GAT);
    its numbers are this plain energy, though: the input energies it gives
    for Cora (:math:`5.088 \cdot 10^5` over all pairs,
    :math:`6.490 \cdot 10^2` over adjacent pairs) are, within 0.1%, those
    of Cora's row-normalised features here (:math:`6.496 \cdot 10^2` over
    adjacent pairs).

    No :math:`N \times N` matrix is built: all pairs use

    .. math::
        \frac{1}{2} \sum_{i,j} \| \mathbf{x}_i - \mathbf{x}_j \|^2 =
        N \sum_i \|\mathbf{x}_i\|^2 - \Big\| \sum_i \mathbf{x}_i \Big\|^2 =
        N \sum_i \| \mathbf{x}_i - \bar{\mathbf{x}} \|^2,

    evaluated in the centred, cancellation-free form in :obj:`float64`;
    adjacent pairs gather the two ends of every edge. Memory is
    :math:`O(N F)` and :math:`O(|\mathcal{E}| F)`, so 100k-node graphs are
    no problem.

    Args:
        x (torch.Tensor): The node features :obj:`[num_nodes, channels]`
            (a one-dimensional tensor is read as one channel; a sparse one
            as its dense form).
        edge_index (torch.Tensor, optional): The edges :obj:`[2, num_edges]`
            (integer node indices in :obj:`[0, num_nodes)`) whose pairs to
            sum over; all pairs if :obj:`None`.
            (default: :obj:`None`)

    :rtype: :class:`torch.Tensor` (a scalar of the dtype of :obj:`x`, at
        least :obj:`float32`: the energy of :obj:`float16` or
        :obj:`bfloat16` features is returned in :obj:`float32`, since it
        easily exceeds the :obj:`float16` range of :math:`65504`)

    Example:
        >>> x = torch.tensor([[0.0], [1.0], [3.0]])
        >>> dirichlet_energy(x)  # 1 + 9 + 4 over the unordered pairs
        tensor(14.)
        >>> dirichlet_energy(x, torch.tensor([[0, 1], [1, 0]]))
        tensor(1.)
    """
    if not isinstance(x, Tensor) or not torch.is_floating_point(x):
        raise TypeError("'x' must be a floating-point tensor of node features")
    if x.layout != torch.strided:
        # Sparse features (bag-of-words datasets) give their dense energy;
        # indexing and `mean` do not run on sparse layouts.
        x = x.to_dense()
    if x.dim() == 1:
        x = x.view(-1, 1)
    if x.dim() != 2:
        raise ValueError(
            f"Expected 'x' of shape [num_nodes, channels] (got "
            f'{list(x.size())})'
        )
    # The sums run in float64; the result is at least float32, because an
    # energy of half-precision features overflows float16 (returned inf).
    out_dtype = torch.promote_types(x.dtype, torch.float32)
    x64 = x.double()

    if edge_index is None:
        centred = x64 - x64.mean(dim=0, keepdim=True)
        energy = x64.size(0) * centred.pow(2).sum()
        return energy.to(out_dtype)

    edge_index = check_edge_index(edge_index, x.size(0))
    diff = x64[edge_index[0]] - x64[edge_index[1]]
    return (0.5 * diff.pow(2).sum()).to(out_dtype)
