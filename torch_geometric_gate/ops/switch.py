r"""The one switch of the attention kernels, :func:`attention_kernel`: which
kernel runs, and the kernels' settings, as options of one scoped
selection (:class:`~torch_geometric_gate.ops.KernelSettings`).

The selection is held per thread. A :obj:`with attention_kernel(...)`
block cannot be entered in a generator or a coroutine (but a
:func:`contextlib.contextmanager`'s, which scopes its caller's block): a
block there would stay in force for whatever runs while the generator is
suspended, and end in whichever thread resumes it. :func:`torch.compile`
guards on the selection: a compiled layer or function recompiles for a
new selection, and runs the one in force.
"""

import contextlib
import functools
import inspect
import sys
import threading
from typing import NamedTuple, Optional

import torch

#: The kernels :func:`attention_kernel` accepts.
KERNELS = ('auto', 'reference', 'chunked', 'triton')

# Code that a `with` block could be suspended in:
_SUSPENDABLE = (
    inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
# contextlib.contextmanager's entry and exit, which drive its generator:
_CONTEXT_MANAGER_CODE = (
    contextlib._GeneratorContextManager.__enter__.__code__,
    contextlib._GeneratorContextManager.__exit__.__code__,
)


class KernelSettings(NamedTuple):
    r"""The kernel selection and the kernels' settings in force (see
    :func:`attention_kernel`, which sets them;
    :func:`current_settings` returns them)."""

    #: The kernel, one of :data:`~torch_geometric_gate.ops.KERNELS`.
    kernel: str = 'auto'
    #: Edge elements (edges times heads times channels) per chunk of the
    #: chunked ATen loops; :obj:`None`: :math:`2^{19}` per intra-op thread
    #: (up to 8) on CPU, so that a chunk's passes after its gathers hit the
    #: cache (``benchmark/results/cpu-chunk-sizes-*.md``), :math:`2^{22}`
    #: on accelerators.
    chunk_elements: Optional[int] = None
    #: Whether eager calls on CPU tensors run the Inductor-compiled loops
    #: where they apply (else the chunked ATen loops, which need no C++
    #: compiler and compile nothing).
    eager_loops: bool = True
    #: From how many edges (self-loops included) :obj:`'auto'` runs the
    #: Triton kernels on CUDA rather than the reference. On an H100
    #: (``benchmark/results/h100-kernels-*.md``) at :math:`10^4` and
    #: :math:`10^5` edges the reference's training step took 2.0-2.9 ms and
    #: Triton's 3.1-4.9 ms (both bound by launches); from :math:`10^6`
    #: edges Triton took 0.35-0.76x
    #: :class:`~torch_geometric.nn.conv.GATv2Conv`'s step and the reference
    #: 1.05-1.13x. The crossing between
    #: :math:`10^5` and :math:`10^6` was not measured.
    triton_min_edges: int = 2**18
    #: Up to how many edge elements the compiled CPU loops run (they write
    #: no :math:`[E, H, C]` temporary but with edge features); past it the
    #: chunked ATen loops, whose temporaries stay chunk-sized, so that a
    #: step's peak stays bounded where the loops are not measured.
    loops_max_elements: int = 2**27
    #: The Triton forward kernel's tile, at most about this many float32
    #: per :obj:`[BLOCK_E, H, C]` tile (a power of two), from which its
    #: block of edges follows (the average in-degree rounded up to a power
    #: of two, at least 4 and at most 64 edges): at 4096 ``ptxas`` keeps
    #: the forward within its registers for sm_90
    #: (``benchmark/triton_compile.py``); ``benchmark/triton_tune.py``
    #: times other tiles on a GPU.
    triton_forward_tile: int = 4096
    #: The Triton backward kernels' tile (they hold more tiles at once); at
    #: 4096 ``ptxas`` gives the backward up to 255 registers and spills
    #: for sm_90, at 2048 none.
    triton_backward_tile: int = 2048
    #: Whether the Triton kernels of one head (the forward and both passes
    #: of the backward) run their one-head layout (2-D :obj:`[BLOCK_E, C]`
    #: tiles, :attr:`triton_one_head_nodes` segments per program, 2 warps
    #: unless :attr:`triton_warps`) instead of the :obj:`[BLOCK_E, H, C]`
    #: tiles of 4 warps; the same outputs and gradients. Off until a GPU
    #: measures it (``benchmark/triton_variants.py``).
    triton_one_head_layout: bool = False
    #: Segments of nodes (targets; sources in the backward's second pass)
    #: per program of the one-head layout, a power of two up to 64
    #: (low-degree nodes share a program; each is a step of the program's
    #: loop).
    triton_one_head_nodes: int = 4
    #: Whether the Triton backward's first (target-side) pass writes a
    #: record per edge and head (16 bytes) that the second (source-side)
    #: pass reads instead of recomputing the scores (with up to 64
    #: channels per head; more recompute); the same gradients. Off until a
    #: GPU measures it (``benchmark/triton_variants.py``).
    triton_backward_record: bool = False
    #: The warps of the Triton forward and backward kernels' programs, a
    #: power of two up to 32; :obj:`None`: Triton's 4 (2 for the one-head
    #: layout).
    triton_warps: Optional[int] = None

    def chunk_size(self, device: torch.device) -> int:
        r"""The edge elements of a chunk on :obj:`device`, for the threads
        in force."""
        return chunk_size(self.chunk_elements, device)


def chunk_size(chunk_elements: Optional[int], device: torch.device) -> int:
    r"""The edge elements of a chunk on :obj:`device` for the setting
    :attr:`~torch_geometric_gate.ops.KernelSettings.chunk_elements`
    (:obj:`None` or :obj:`0`: the default for the device and the threads in
    force)."""
    if chunk_elements:
        return chunk_elements
    if device.type == 'cpu':
        return 2**19 * min(torch.get_num_threads(), 8)
    return 2**22


_INT64_MAX = 2**63 - 1


def _power_of_two(value, largest: Optional[int]) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool)
        and value > 0 and value & (value - 1) == 0
        and (largest is None or value <= largest)
    )  # fmt: skip


class _Selection:
    r"""One thread's selection: a plain object, whose writes
    :func:`torch.compile` replays where a graph break splits a block
    (not a thread-local's :obj:`__dict__`'s)."""

    def __init__(self):
        self.settings = KernelSettings()


class _State(threading.local):
    def __init__(self):
        self.selection = _Selection()


_STATE = _State()


def current_settings() -> KernelSettings:
    r"""The :class:`~torch_geometric_gate.ops.KernelSettings` in force in
    this thread."""
    # A thread-local attribute: torch.compile guards on its value.
    return _STATE.selection.settings


class attention_kernel:
    r"""Selects the kernel of :class:`~torch_geometric_gate.GATEConv`'s
    attention (and of :func:`~torch_geometric_gate.ops.gate_attention`),
    and the kernels' settings, within a :obj:`with` block, for the current
    thread, as :func:`torch.nn.attention.sdpa_kernel` does for scaled
    dot-product attention. Options left at :obj:`None` keep the enclosing
    block's (the defaults of
    :class:`~torch_geometric_gate.ops.KernelSettings` outside any block),
    or take the defaults with :obj:`inherit=False`. It also decorates a
    function (not a generator or a coroutine function): each call runs in
    the selection.

    * :obj:`'auto'` (the default): the chunked kernels on CPU tensors; on
      CUDA the Triton kernels from :obj:`triton_min_edges` edges (the
      reference below, faster on small graphs, and for float64), under
      :func:`torch.compile` too (the kernels are custom operators); the
      reference on other devices, and wherever the kernels do not apply:
      under a :mod:`torch.func` transform or forward-mode AD
      (:mod:`torch.autograd.forward_ad`), and for the layer in explain
      mode, with message-passing hooks registered (a kernel would skip
      them), an edge projection :obj:`lin_edge` that is not a bias-free
      :class:`~torch_geometric.nn.dense.Linear` without hooks (the kernels
      read its weight), with another aggregation than a sum, the
      :obj:`target_to_source` flow, a :obj:`negative_slope` below 0, or
      edge features before a lazy :obj:`edge_dim` is initialized.
    * :obj:`'reference'`: PyG's message passing,
      :meth:`~torch_geometric.nn.conv.MessagePassing.edge_updater` and
      :meth:`~torch_geometric.nn.conv.MessagePassing.propagate` (the layer
      as PyG ships it; hooks, explainers, TorchScript,
      :func:`torch.compile` and :mod:`torch.func` all work).
    * :obj:`'chunked'`: the memory-lean kernels of
      ``torch_geometric_gate.ops.chunked``. On CPU tensors, up to
      :obj:`loops_max_elements`, they run loops that Inductor compiles (a
      C++ compiler is needed; the first call of a setting compiles for
      seconds): under :func:`torch.compile` in one thread up to four
      threads and in parallel past them, eagerly up to four threads. Eager
      calls past four threads, with :obj:`eager_loops=False` or without a
      working compiler (a warning says so), and all calls elsewhere, run
      chunks of ATen operations.
    * :obj:`'triton'`: the fused GPU kernels of
      ``torch_geometric_gate.ops.triton`` (CPU tensors under
      :obj:`TRITON_INTERPRET=1`).

    Forcing a kernel that cannot run a call raises a :class:`RuntimeError`
    that says why. Double backward works with every kernel. A layer
    scripted with :func:`torch.jit.script` runs the reference whatever the
    selection (the switch is Python). Under
    :func:`torch.utils.checkpoint.checkpoint` the backward recomputes the
    forward under the selection in force at the backward: put the
    :obj:`.backward()` call in the same block as the forward.

    Args:
        name (str, optional): The kernel, one of
            :data:`~torch_geometric_gate.ops.KERNELS`.
        chunk_elements (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.chunk_elements`.
        eager_loops (bool, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.eager_loops`.
        triton_min_edges (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_min_edges`.
        loops_max_elements (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.loops_max_elements`.
        triton_forward_tile (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_forward_tile`.
        triton_backward_tile (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_backward_tile`.
        triton_one_head_layout (bool, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_one_head_layout`.
        triton_one_head_nodes (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_one_head_nodes`.
        triton_backward_record (bool, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_backward_record`.
        triton_warps (int, optional): See
            :attr:`~torch_geometric_gate.ops.KernelSettings.triton_warps`.
        inherit (bool, optional): If set to :obj:`False`, the options left
            at :obj:`None` take the defaults of
            :class:`~torch_geometric_gate.ops.KernelSettings` instead of the
            enclosing block's. (default: :obj:`True`)

    Example:
        >>> import torch
        >>> from torch_geometric_gate import GATEConv, attention_kernel
        >>> conv = GATEConv(8, 4)
        >>> x, edge_index = torch.randn(3, 8), torch.tensor([[0, 1], [1, 2]])
        >>> with attention_kernel('reference'):
        ...     out = conv(x, edge_index)
        >>> with attention_kernel('chunked', eager_loops=False):
        ...     torch.allclose(out, conv(x, edge_index), atol=1e-6)
        True
        >>> @attention_kernel('chunked', eager_loops=False)
        ... def lean(x):
        ...     return conv(x, edge_index)
        >>> torch.allclose(out, lean(x), atol=1e-6)
        True
    """

    def __init__(
        self,
        name: Optional[str] = None,
        *,
        chunk_elements: Optional[int] = None,
        eager_loops: Optional[bool] = None,
        triton_min_edges: Optional[int] = None,
        loops_max_elements: Optional[int] = None,
        triton_forward_tile: Optional[int] = None,
        triton_backward_tile: Optional[int] = None,
        triton_one_head_layout: Optional[bool] = None,
        triton_one_head_nodes: Optional[int] = None,
        triton_backward_record: Optional[bool] = None,
        triton_warps: Optional[int] = None,
        inherit: bool = True,
    ):
        if name is not None and name not in KERNELS:
            raise ValueError(
                f'Unknown attention kernel {name!r}; expected one of {KERNELS}'
            )
        for option, value, largest in (
            ('triton_forward_tile', triton_forward_tile, None),
            ('triton_backward_tile', triton_backward_tile, None),
            ('triton_one_head_nodes', triton_one_head_nodes, 64),
            ('triton_warps', triton_warps, 32),
        ):
            if value is not None and not _power_of_two(value, largest):
                raise ValueError(
                    f"Expected '{option}' to be a power of two"
                    f'{"" if largest is None else f" up to {largest}"}'
                    f' (got {value!r})'
                )
        for option, value in (
            ('chunk_elements', chunk_elements),
            ('triton_min_edges', triton_min_edges),
            ('loops_max_elements', loops_max_elements),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int)
                or value < (option == 'chunk_elements')
            ):  # fmt: skip
                raise ValueError(
                    f"Expected '{option}' to be a "
                    f'{"positive" if option == "chunk_elements" else "non-negative"}'  # noqa: E501
                    f' int (got {value!r})'
                )
        # The kernels' custom operators take these as int64 (under
        # torch.compile a larger one failed in the operator's call):
        for option, value in (
            ('chunk_elements', chunk_elements),
            ('loops_max_elements', loops_max_elements),
            ('triton_forward_tile', triton_forward_tile),
            ('triton_backward_tile', triton_backward_tile),
        ):
            if value is not None and value > _INT64_MAX:
                raise ValueError(
                    f"Expected '{option}' to be at most 2**63 - 1, the "
                    f"kernels' operators take an int64 (got {value!r})"
                )
        for option, value in (
            ('eager_loops', eager_loops),
            ('triton_one_head_layout', triton_one_head_layout),
            ('triton_backward_record', triton_backward_record),
        ):
            if value is not None and not isinstance(value, bool):
                raise ValueError(
                    f"Expected '{option}' to be a bool (got {value!r})"
                )
        if not isinstance(inherit, bool):
            raise ValueError(
                f"Expected 'inherit' to be a bool (got {inherit!r})"
            )
        options = dict(
            kernel=name, chunk_elements=chunk_elements,
            eager_loops=eager_loops, triton_min_edges=triton_min_edges,
            loops_max_elements=loops_max_elements,
            triton_forward_tile=triton_forward_tile,
            triton_backward_tile=triton_backward_tile,
            triton_one_head_layout=triton_one_head_layout,
            triton_one_head_nodes=triton_one_head_nodes,
            triton_backward_record=triton_backward_record,
            triton_warps=triton_warps,
        )  # fmt: skip
        self._options = {k: v for k, v in options.items() if v is not None}
        self._inherit = inherit
        self._saved = []

    def __call__(self, fn):
        # The decorator form; a generator's or a coroutine's body would run
        # after the call returned, outside the selection:
        if not callable(fn):
            raise TypeError(
                f'attention_kernel(...) decorates a function; got '
                f'{type(fn).__name__}'
            )
        # (A partial's function too; an object's `__call__`:)
        if any(
            check(code)
            for check in (
                inspect.isgeneratorfunction,
                inspect.iscoroutinefunction,
                inspect.isasyncgenfunction,
            )
            for code in (fn, type(fn).__call__)
        ):
            name = getattr(fn, '__name__', repr(fn))
            raise TypeError(
                f'attention_kernel(...) cannot decorate the generator or '
                f"coroutine function '{name}': its body runs after "
                'the call returns, outside the selection. Decorate a plain '
                'function, or enter the block around the code that '
                'consumes it'
            )

        # A block per call (torch.compile enters a block made in the code
        # it traces, not one made outside):
        options = dict(self._options, inherit=self._inherit)
        name = options.pop('kernel', None)

        @functools.wraps(fn)
        def selected(*args, **kwargs):
            with attention_kernel(name, **options):
                return fn(*args, **kwargs)

        return selected

    def __enter__(self) -> KernelSettings:
        # (Dynamo traces a block inside a compiled function, not frames:)
        frame = None if torch.compiler.is_compiling() else sys._getframe(1)
        if (
            frame is not None
            and frame.f_code.co_flags & _SUSPENDABLE
            and not (
                frame.f_back is not None
                and frame.f_back.f_code in _CONTEXT_MANAGER_CODE
            )
        ):
            raise RuntimeError(
                f'attention_kernel(...) cannot be entered in the generator '
                f"or coroutine '{frame.f_code.co_name}': the selection "
                'would stay in force while it is suspended (and end in '
                'whichever thread resumes it). Select around the code that '
                'consumes it, or in a plain function it calls'
            )
        # This thread's selection: the block ends in it whichever thread
        # exits it.
        selection = _STATE.selection
        settings = selection.settings
        self._saved.append((selection, settings))
        base = settings if self._inherit else KernelSettings()
        # The constructor, not `_replace`: torch 2.11's Dynamo writes the
        # result of `_replace` (a NamedTuple made by `_make` from a `map`)
        # back as an empty tuple where a graph break splits the block.
        selection.settings = KernelSettings(
            **{**base._asdict(), **self._options}
        )
        return selection.settings

    def __exit__(self, *exc) -> None:
        # The last entry of this thread (one instance may be entered in
        # several threads at once), else the last (a block that another
        # thread exits).
        own, saved = _STATE.selection, self._saved
        i = len(saved) - 1
        while i > 0 and saved[i][0] is not own:
            i -= 1
        if saved[i][0] is not own:
            i = len(saved) - 1
        selection, settings = saved.pop(i)
        selection.settings = settings
