r"""GATE's Triton kernels compiled for a GPU target on any machine, no GPU
needed: Triton's compiler down to PTX, then the ``ptxas`` that Triton ships
for the registers per thread and the bytes spilled to local memory (what
the compiler decides, not a timing). The launches come from the kernels
themselves: :func:`record_launches` runs
:func:`~torch_geometric_gate.ops.triton.triton_attention` forward and
backward on a tiny graph under the Triton interpreter and records every
kernel launch as Triton's launcher specialises it (its signature, the
``tl.constexpr`` values, and the 16-byte alignment and divisibility hints,
except where an argument is declared ``do_not_specialize``), so the
compiled variants are the ones a run launches::

    python benchmark/triton_compile.py --heads 1 8 8 --channels 64 8 64 \
        --dtypes float32 bfloat16 --arch 90 \
        --out benchmark/results/triton-registers.md

``--heads`` and ``--channels`` pair up (heads * channels is the layer's
width); ``--forward-tile``, ``--backward-tile``, ``--one-head-layout``,
``--backward-record`` and ``--warps`` record the launches under those
options of :func:`~torch_geometric_gate.attention_kernel` (its
:class:`~torch_geometric_gate.ops.KernelSettings`). The kernels come from
:func:`torch_geometric_gate.ops.triton.kernels`. ``test/ops/test_triton.py``
uses the same functions to check that every kernel compiles for sm_90 and
sm_80.
"""

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from contextlib import contextmanager, redirect_stdout
from io import StringIO

from cli import int_at_least
from report import output_folder

#: The kernels the default options launch.
KERNELS = ('gate_csr_kernel', 'gate_rev_pos_kernel', 'gate_fwd_kernel',
           'gate_combine_kernel', 'gate_alpha_kernel', 'gate_keep_kernel',
           'gate_bwd_dst_kernel', 'gate_bwd_combine_kernel',
           'gate_bwd_src_kernel', 'gate_bwd_src_combine_kernel',
           'gate_seg_count_kernel', 'gate_seg_node_kernel',
           'gate_att_grad_kernel')  # fmt: skip
#: Edges into the hub of :func:`record_launches`' graph: more than a
#: segment of the kernels holds (1024 edges), so that the split nodes'
#: work lists and combine kernels launch too (the register report's test
#: checks they do).
HUB_EDGES = 1025


def _do_not_specialize(kernel):
    r"""The names of ``kernel``'s arguments declared ``do_not_specialize``
    (compiled :class:`~triton.runtime.jit.JITFunction` or interpreted)."""
    names = getattr(kernel, 'do_not_specialize', None)
    if names is None:  # the interpreter keeps the decorator's arguments
        names = getattr(kernel, 'kwargs', {}).get('do_not_specialize')
    arg_names = list(inspect.signature(kernel.fn).parameters)
    return {arg_names[n] if isinstance(n, int) else n for n in names or ()}


def launch_record(name, kernel, args, **extra):
    r"""Triton's signature, constants and attributes of one launch of
    ``kernel`` (positional arguments, as
    :mod:`torch_geometric_gate.ops.triton` launches them), specialised as
    Triton's launcher does: an integer argument equal to 1 becomes a
    constant, and a pointer aligned to 16 bytes or an integer divisible by
    16 gets the ``tt.divisibility`` hint (``attrs``: ``'D'``), except for
    the arguments declared ``do_not_specialize``."""
    from triton import language as tl
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    params = inspect.signature(kernel.fn).parameters
    if len(args) != len(params):
        raise ValueError(f'{name}: expected every argument positional')
    fixed = _do_not_specialize(kernel)
    signature, constants, attrs = {}, {}, {}
    for (arg, param), value in zip(params.items(), args):
        if param.annotation in (tl.constexpr, 'tl.constexpr'):
            signature[arg], constants[arg] = 'constexpr', value
            continue
        kind, attr = native_specialize_impl(
            BaseBackend, value, False, arg not in fixed, True
        )
        signature[arg] = kind
        if kind == 'constexpr':
            constants[arg] = value
        elif attr:
            attrs[arg] = attr
    return dict(
        kernel=name, signature=signature, constants=constants, attrs=attrs,
        **extra,
    )  # fmt: skip


@contextmanager
def recording(launches, names=None, **extra):
    r"""Under it, every launch of the kernels ``names`` (default: all of
    :func:`torch_geometric_gate.ops.triton.kernels`; run under the Triton
    interpreter) is added to the dict ``launches``, once per distinct
    signature, constants and warps (``num_warps``, where the launch gives
    them), with the ``extra`` fields."""
    from torch_geometric_gate.ops.triton import kernels as gate_kernels

    kernels = gate_kernels()
    saved = {name: kernels[name].run for name in names or kernels}
    for name, run_kernel in saved.items():
        kernel = kernels[name]

        def run(*args, _name=name, _kernel=kernel, _run=run_kernel, **kw):
            record = launch_record(_name, _kernel, args, **extra)
            if kw.get('num_warps') is not None:  # else Triton's default
                record['num_warps'] = kw['num_warps']
            launches[json.dumps(record, sort_keys=True)] = record
            return _run(*args, **kw)

        kernel.run = run
    try:
        yield launches
    finally:
        for name, run_kernel in saved.items():
            kernels[name].run = run_kernel


def compile_launches(launches, arch, ptxas_report=False, kernels=None):
    r"""Compiles every launch of the ``kernels`` (a module, or a dict by
    name; default: GATE's, :func:`torch_geometric_gate.ops.triton.kernels`)
    for ``sm_<arch>`` to a cubin, or raises a :class:`RuntimeError` naming
    the kernel and its constants. With ``ptxas_report``, returns per launch
    the registers per thread and the spill stores and loads (bytes) that
    the ``ptxas`` run of Triton's compile reports (its log, so the numbers
    are those of the cubin Triton builds; compiled afresh, not from
    Triton's cache)."""
    import triton
    from triton.backends.compiler import BaseBackend, GPUTarget
    from triton.compiler import ASTSource

    if kernels is None:
        from torch_geometric_gate.ops.triton import kernels as gate_kernels

        kernels = gate_kernels()
    elif not isinstance(kernels, dict):
        kernels = vars(kernels)
    rows = []
    for launch in launches:
        kernel = kernels[launch['kernel']]
        names = list(inspect.signature(kernel.fn).parameters)
        attrs = {
            (names.index(arg),): BaseBackend.parse_attr(attr)
            for arg, attr in launch.get('attrs', {}).items()
        }
        source = ASTSource(
            kernel, launch['signature'], launch['constants'], attrs
        )
        log = StringIO()
        try:
            with _fresh_compile(ptxas_report), redirect_stdout(log):
                options = None
                if launch.get('num_warps') is not None:
                    options = {'num_warps': launch['num_warps']}
                compiled = triton.compile(
                    source, target=GPUTarget('cuda', arch, 32),
                    options=options,
                )  # fmt: skip
        except Exception as e:
            raise RuntimeError(
                f'{launch["kernel"]} with {launch["constants"]} does not '
                f'compile for sm_{arch}: {type(e).__name__}: {e}'
            ) from e
        if not compiled.asm.get('cubin'):
            raise RuntimeError(f'{launch["kernel"]}: no cubin for sm_{arch}')
        if ptxas_report:
            rows.append(
                dict(
                    launch,
                    num_warps=compiled.metadata.num_warps,
                    **_ptxas_numbers(log.getvalue(), launch['kernel']),
                )
            )
    return rows


@contextmanager
def _fresh_compile(log):
    r"""With ``log``: Triton prints its ``ptxas -v`` log
    (``TRITON_DUMP_PTXAS_LOG``) and compiles into an empty cache, so that
    ``ptxas`` runs."""
    if not log:
        yield
        return
    keep = {k: os.environ.get(k) for k in ('TRITON_DUMP_PTXAS_LOG',
                                            'TRITON_CACHE_DIR')}  # fmt: skip
    with tempfile.TemporaryDirectory() as cache:
        os.environ.update(TRITON_DUMP_PTXAS_LOG='1', TRITON_CACHE_DIR=cache)
        try:
            yield
        finally:
            for k, v in keep.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _ptxas_numbers(log, kernel):
    registers = re.search(r'Used (\d+) registers', log)
    spills = re.search(
        r'(\d+) bytes spill stores, (\d+) bytes spill loads', log
    )
    if registers is None or spills is None:
        raise RuntimeError(f'{kernel}: no ptxas log from the compile: {log!r}')
    return dict(
        registers=int(registers.group(1)),
        spill_stores=int(spills.group(1)),
        spill_loads=int(spills.group(2)),
    )


def has_ptxas():
    r"""Whether this Triton ships the ``ptxas`` that compiling needs (its
    wheels for x86 Linux do) or is pointed to one."""
    import triton

    bin_dir = os.path.join(
        os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin'
    )
    return os.path.isfile(os.path.join(bin_dir, 'ptxas')) or bool(
        os.environ.get('TRITON_PTXAS_PATH')
    )


def record_launches(configs, double_backward=False, options=None):
    r"""The launches of forward and backward (alpha and the output both
    with a gradient) for each ``(heads, channels, dtype, edge_dim,
    dropout)`` of ``configs`` on a tiny graph with a hub split across
    programs, under the interpreter (``TRITON_INTERPRET=1`` must be set
    before Triton is imported), under ``attention_kernel('triton',
    **options)``; with ``double_backward``, a second-order backward too
    where there is dropout (it redraws the mask with the keep kernel)."""
    import torch

    from torch_geometric_gate.ops import attention_kernel, gate_attention

    num = 6  # node 5: no edges but its self-loop; 4 -> 0: a hub both ways
    hub = HUB_EDGES
    src = torch.tensor([1, 2, 3, 0, 2, 0, 1, 2, 3] + [4] * hub + [0, 1, 2])
    dst = torch.tensor([0, 0, 0, 1, 1, 2, 3, 2, 3] + [0] * hub + [0, 1, 2])
    loop = src == dst
    masked = torch.zeros_like(loop)
    masked[4] = True
    launches = {}
    for heads, channels, dtype_name, edge_dim, dropout in configs:
        dtype = getattr(torch, dtype_name)
        gen = torch.Generator().manual_seed(0)

        def rand(*shape, dt=dtype, gen=gen):
            return torch.randn(*shape, generator=gen).to(dt).requires_grad_()

        q_src, q_dst, value = (rand(num, heads, channels) for _ in range(3))
        edge_attr = rand(src.numel(), edge_dim) if edge_dim else None
        weight = rand(heads * channels, edge_dim) if edge_dim else None
        att = [rand(1, heads, channels, dt=torch.float32) for _ in range(2)]
        shape = dict(
            heads=heads, channels=channels, dtype=dtype_name,
            edge_dim=edge_dim or 0, dropout=dropout,
        )  # fmt: skip
        with recording(launches, **shape):
            for order in (1, 2) if double_backward and dropout else (1,):
                torch.manual_seed(0)
                with attention_kernel('triton', **(options or {})):
                    out, alpha = gate_attention(
                        q_src, q_dst, value, torch.stack([src, dst]), *att,
                        edge_attr=edge_attr, weight_edge=weight,
                        negative_slope=0.2, dropout_p=dropout,
                        need_weights=True, loop=loop, masked=masked,
                    )  # fmt: skip
                loss = out.float().square().sum() + alpha.float().sum()
                if order == 1:
                    loss.backward()
                    continue
                wanted = [
                    t
                    for t in (q_src, q_dst, value, edge_attr, weight, *att)
                    if t is not None
                ]
                first = torch.autograd.grad(loss, wanted, create_graph=True)
                sum(g.float().square().sum() for g in first).backward()
    return list(launches.values())


def markdown(rows, argv):
    from report import machine_info

    lines = [
        '# Triton kernels: registers and spills (ptxas, no GPU)',
        '',
        'Command: `python benchmark/triton_compile.py ' + ' '.join(argv) + '`',
        '',
        *machine_info(),
        '',
        '| sm | heads | channels | dtype | kernel | BLOCK_E | warps '
        '| registers | spill stores (B) | spill loads (B) |',
        '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ]
    for r in rows:
        lines.append(
            f'| {r["arch"]} | {r["heads"]} | {r["channels"]} | {r["dtype"]} | '
            f'{r["kernel"]} | {r["constants"].get("BLOCK_E", "")} | '
            f'{r["num_warps"]} | {r["registers"]} | {r["spill_stores"]} | '
            f'{r["spill_loads"]} |'
        )
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=(
            "Compiles GATE's Triton kernels for a GPU target on any "
            'machine (no GPU needed) and reports the registers per thread '
            "and the bytes spilled that Triton's ptxas gives, for the "
            'kernel launches a run makes.'
        )
    )
    parser.add_argument(
        '--heads', type=int_at_least(1), nargs='+', default=[1, 8]
    )
    parser.add_argument(
        '--channels', type=int_at_least(1), nargs='+', default=[64, 8]
    )
    parser.add_argument(
        '--dtypes', nargs='+', default=['float32', 'bfloat16'],
        choices=['float32', 'bfloat16', 'float16'],
    )  # fmt: skip
    parser.add_argument(
        '--arch', type=int, nargs='+', default=[90],
        help='compute capabilities (90: H100, H200; 80: A100)',
    )  # fmt: skip
    parser.add_argument(
        '--forward-tile', type=int,
        help="the switch's triton_forward_tile (default: its default)",
    )  # fmt: skip
    parser.add_argument(
        '--backward-tile', type=int,
        help="the switch's triton_backward_tile (default: its default)",
    )  # fmt: skip
    parser.add_argument(
        '--one-head-layout', action='store_true',
        help="the switch's triton_one_head_layout (for one head)",
    )  # fmt: skip
    parser.add_argument(
        '--backward-record', action='store_true',
        help="the switch's triton_backward_record",
    )  # fmt: skip
    parser.add_argument(
        '--warps', type=int,
        help="the switch's triton_warps (default: Triton's)",
    )  # fmt: skip
    parser.add_argument('--out', help='a markdown file for the table')
    parser.add_argument(
        '--launches',
        help='compile the launches of this JSON file (a list of records, '
        'as record_launches returns) for every --arch, without the report',
    )
    parser.add_argument('--record', help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.launches:
        os.environ.pop('TRITON_INTERPRET', None)
        with open(args.launches) as f:
            launches = json.load(f)
        for arch in args.arch:
            compile_launches(launches, arch)
        print(
            f'compiled {len(launches)} launches for {len(args.arch)} targets'
        )
        return None
    if len(args.heads) != len(args.channels):
        parser.error('--heads and --channels pair up: give as many of each')
    if args.out and os.path.isdir(args.out):
        parser.error(
            f'argument --out: expected a markdown file, got the folder '
            f'{args.out!r}'
        )
    if args.out:  # Its folder, before the minutes of compiling:
        output_folder(parser, os.path.dirname(os.path.abspath(args.out)))
    configs = [
        (h, c, d, None, 0.0)
        for d in args.dtypes
        for h, c in zip(args.heads, args.channels)
    ]
    options = dict(
        triton_forward_tile=args.forward_tile,
        triton_backward_tile=args.backward_tile,
        triton_one_head_layout=args.one_head_layout or None,
        triton_backward_record=args.backward_record or None,
        triton_warps=args.warps,
    )  # fmt: skip
    options = {k: v for k, v in options.items() if v is not None}
    if not args.record:  # This process compiles: Triton not interpreted.
        os.environ.pop('TRITON_INTERPRET', None)
    from torch_geometric_gate.ops import attention_kernel

    try:  # The switch checks them, before any work:
        attention_kernel(**options)
    except ValueError as err:
        parser.error(str(err))
    if args.record:  # The interpreted half, in a process of its own:
        with open(args.record, 'w') as f:
            json.dump(record_launches(configs, options=options), f)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'launches.json')
        env = dict(os.environ, TRITON_INTERPRET='1')
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), *argv, '--record',
             path],
            check=True, env=env,
        )  # fmt: skip
        with open(path) as f:
            launches = json.load(f)
    os.environ.pop('TRITON_INTERPRET', None)
    rows = [
        dict(row, arch=arch)
        for arch in args.arch
        for row in compile_launches(launches, arch, ptxas_report=True)
    ]
    text = markdown(rows, argv)
    print(text)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    return rows


if __name__ == '__main__':
    main()
