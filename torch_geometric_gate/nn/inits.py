import torch
from torch import Tensor

_POSITIONS = ('first', 'hidden', 'last', 'only')


def looks_linear_orthogonal_(weight: Tensor, position: str) -> Tensor:
    r"""Fills the :obj:`(out_channels, in_channels)` :obj:`weight` in place
    with the orthogonal *looks-linear* structure of `"Initialization of ReLUs
    for Dynamical Isometry" <https://arxiv.org/abs/1806.06362>`_ (Burkholz &
    Dubatovka, NeurIPS 2019), the initialisation of the GATE paper's
    Appendix B.

    With :math:`\mathbf{D}` drawn by :func:`torch.nn.init.orthogonal_`
    (orthonormal rows or columns, whichever are fewer), the blocks are

    .. math::
        \textrm{first:}\ \begin{bmatrix} \mathbf{D} \\ -\mathbf{D}
        \end{bmatrix}, \quad
        \textrm{hidden:}\ \begin{bmatrix} \mathbf{D} & -\mathbf{D} \\
        -\mathbf{D} & \mathbf{D} \end{bmatrix}, \quad
        \textrm{last:}\ \begin{bmatrix} \mathbf{D} & -\mathbf{D}
        \end{bmatrix}, \quad
        \textrm{only:}\ \mathbf{D},

    with :math:`\mathbf{D}` of shape :obj:`(out/2, in)`, :obj:`(out/2, in/2)`,
    :obj:`(out, in/2)` and :obj:`(out, in)`, respectively.
    A first layer thus emits every feature :math:`\mathbf{y} = \mathbf{D}
    \mathbf{x}` together with its negative, and since
    :math:`\mathrm{ReLU}(y) - \mathrm{ReLU}(-y) = y`, the next (hidden or last)
    layer recovers :math:`\mathbf{y}` exactly from the pair. A ReLU network
    (without biases) initialised this way computes the *linear* map
    :math:`\mathbf{D}_L \cdots \mathbf{D}_1 \mathbf{x}`; in a GNN whose
    aggregation is linear at initialisation (for GATE: zero attention
    vectors, hence a mean over each node's neighbors and itself) the whole
    network is linear as well.

    :obj:`'only'` is a network of a single layer, first and last at once.
    It has no ReLU around it, so it is linear for any weight and needs no
    mirroring: it gets a plain orthogonal :math:`\mathbf{D}` (mirroring rows
    *and* columns would produce the rank-deficient hidden block, and
    mirroring only the rows would tie the logits of half of the outputs to
    the negatives of the others).

    Args:
        weight (torch.Tensor): A two-dimensional :obj:`(out, in)` tensor,
            filled in place (without recording gradients).
        position (str): Where the layer sits in the network: :obj:`'first'`
            (requires an even :obj:`out`), :obj:`'hidden'` (even :obj:`out`
            and :obj:`in`), :obj:`'last'` (even :obj:`in`) or :obj:`'only'`
            (any size).

    :rtype: :class:`torch.Tensor` (the :obj:`weight` itself)

    Example:
        >>> import torch
        >>> from torch_geometric_gate.nn.inits import looks_linear_orthogonal_
        >>> w = looks_linear_orthogonal_(torch.empty(4, 6), 'hidden')
        >>> torch.equal(w[:2, :3], -w[:2, 3:]), torch.equal(w[:2], -w[2:])
        (True, True)
        >>> d = w[:2, :3]  # orthonormal rows
        >>> torch.allclose(d @ d.t(), torch.eye(2), atol=1e-6)
        True
    """
    if not isinstance(weight, Tensor):
        raise TypeError(
            f"'weight' must be a torch.Tensor (got {type(weight).__name__})"
        )
    if weight.dim() != 2:
        raise ValueError(
            f"'weight' must be two-dimensional (out_channels, "
            f'in_channels) (got shape {list(weight.size())})'
        )
    if position not in _POSITIONS:
        raise ValueError(
            f"'position' must be one of {_POSITIONS} (got {position!r})"
        )
    out_channels, in_channels = weight.size()
    halve_out = position in ('first', 'hidden')
    halve_in = position in ('hidden', 'last')
    if halve_out and out_channels % 2 != 0:
        raise ValueError(
            f"The looks-linear construction for position '{position}' "
            f'mirrors the rows of the weight and needs an even number of '
            f'output channels (got shape {list(weight.size())})'
        )
    if halve_in and in_channels % 2 != 0:
        raise ValueError(
            f"The looks-linear construction for position '{position}' "
            f'mirrors the columns of the weight and needs an even number of '
            f'input channels (got shape {list(weight.size())})'
        )

    rows = out_channels // 2 if halve_out else out_channels
    cols = in_channels // 2 if halve_in else in_channels
    # Drawn in at least float32 (no QR in half precision), then cast:
    dtype = torch.promote_types(weight.dtype, torch.float32)
    d = weight.new_empty(rows, cols, dtype=dtype)
    if d.numel() > 0:
        torch.nn.init.orthogonal_(d)
    if halve_in:
        d = torch.cat([d, -d], dim=1)
    if halve_out:
        d = torch.cat([d, -d], dim=0)
    with torch.no_grad():
        weight.copy_(d)
    return weight


__all__ = ['looks_linear_orthogonal_']
