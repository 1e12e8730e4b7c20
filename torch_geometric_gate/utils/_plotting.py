import os
from typing import List, Sequence, Union

from torch import Tensor


def import_figure():
    r"""Imports :class:`matplotlib.figure.Figure` lazily, with a clear error
    when matplotlib is missing. Figures are built without :mod:`pyplot`, so
    no global state or interactive backend is touched.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            'Plotting the self-attention requires matplotlib; install it '
            "with 'pip install matplotlib' (or the 'full' extra of "
            'torch-geometric-gate)'
        ) from e
    return Figure


def layer_names(
    num_layers: int, names: Union[Sequence[str], None]
) -> List[str]:
    if names is None:
        return [f'layer {i + 1}' for i in range(num_layers)]
    if isinstance(names, (str, bytes)):
        # list('ab') would name two layers 'a' and 'b'.
        raise TypeError(
            f"'layer_names' must be a list of strings, one per layer (got "
            f'the string {names!r})'
        )
    names = list(names)
    if len(names) != num_layers:
        raise ValueError(
            f"Expected {num_layers} 'layer_names' (got {len(names)})"
        )
    return names


def save(fig, path):
    if path is None:
        return
    if isinstance(path, (str, os.PathLike)):
        if os.path.isdir(path):
            # matplotlib would write '<dir>.png' beside the directory.
            raise ValueError(
                f"'path' must be the path of a file, such as 'alpha_vv.png' "
                f'(got the directory {os.fspath(path)!r})'
            )
    elif not hasattr(path, 'write'):
        # matplotlib would fail while writing, with "'int' object has no
        # attribute 'write'".
        raise TypeError(
            f"'path' must be a file path (str or os.PathLike), a binary "
            f'file object or None (got {type(path).__name__})'
        )
    fig.savefig(path, bbox_inches='tight')


def check_alpha_list(alpha_vv) -> List[Tensor]:
    if isinstance(alpha_vv, Tensor) or not isinstance(alpha_vv, (list, tuple)):
        raise TypeError(
            "'alpha_vv' must be a list of tensors, one per "
            f'layer (got {type(alpha_vv).__name__})'
        )
    if len(alpha_vv) == 0:
        raise ValueError("'alpha_vv' must hold at least one layer")
    for i, a in enumerate(alpha_vv):
        if not isinstance(a, Tensor) or a.numel() == 0 or a.dim() > 2:
            raise ValueError(
                f'Expected a non-empty [num_nodes] or [num_nodes, heads] '
                f'tensor for layer {i} (got '
                f'{list(a.size()) if isinstance(a, Tensor) else a!r})'
            )
    return list(alpha_vv)
