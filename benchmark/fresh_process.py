r"""One training step in a fresh process (nothing of the caller's memory is
counted), on CPU under a cap on the address space it may add after its
imports: what :obj:`deep.py` and :obj:`pair.py --rss` measure."""

import ctypes
import resource
import sys
import time
from typing import Callable, Optional

import torch
from common import (
    DeepModel,
    Step,
    is_oom,
    load_graph,
    make_layer,
    saved_bytes,
    status_of,
    sync,
)


def proc_status_bytes(key: str) -> Optional[int]:
    r"""A size from Linux's :obj:`/proc/self/status` (:obj:`VmHWM`,
    :obj:`VmSize`, ...) in bytes, or :obj:`None` elsewhere."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(key + ':'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> Callable[[], int]:
    r"""Resets the peak resident size (Linux :obj:`VmHWM`) to the current
    one and returns a function that reads the peak in bytes (elsewhere:
    :obj:`ru_maxrss`, not reset)."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        if proc_status_bytes('VmHWM') is not None:
            return lambda: proc_status_bytes('VmHWM')
    except OSError:
        pass
    scale = 1 if sys.platform == 'darwin' else 1024
    return lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def one_malloc_arena() -> None:
    r"""Makes glibc's :obj:`malloc` serve every thread from one arena
    (:obj:`mallopt(M_ARENA_MAX, 1)`; nothing elsewhere). A thread's own
    arena reserves 64 MiB of address space, little of it memory: torch
    2.11's CUDA build starts 8 autograd threads (``pt_autograd_*``) at the
    first backward of a compiled function, which reserved 0.5 GiB of the
    cap on CPU."""
    try:
        ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def cap_address_space(cap_gb: float):
    r"""Caps what this process may map beyond what it maps now
    (:obj:`RLIMIT_AS`; the libraries of a CUDA build of torch map about 3
    GiB, a CPU build's about 1 GiB): allocations past it raise
    :class:`MemoryError` or a :class:`RuntimeError` that :func:`is_oom`
    recognises. The threads share one malloc arena
    (:func:`one_malloc_arena`), so that the cap counts what is allocated."""
    one_malloc_arena()
    limit = (proc_status_bytes('VmSize') or 0) + int(cap_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def fresh_process_step(spec: dict) -> dict:
    r"""Runs :func:`measure_step` on :obj:`spec` in a fresh process, and
    returns its result, or :obj:`{'status': 'exceeds cap'}` when the process
    died (the out-of-memory killer, a signal), or an error status when it
    raised. On CPU the process is forked from :mod:`multiprocessing`'s fork
    server, which imports torch and PyG once for all the steps (a spawned
    process spends seconds on them every time); CUDA steps are spawned
    (CUDA cannot run in a fork of a process that has asked for devices).
    Either way the step's process has done nothing but the imports."""
    import concurrent.futures as cf
    import multiprocessing as mp

    if torch.device(spec['device']).type == 'cpu':
        context = mp.get_context('forkserver')
        context.set_forkserver_preload(['torch', 'common'])
    else:
        context = mp.get_context('spawn')
    with cf.ProcessPoolExecutor(1, mp_context=context) as ex:
        try:
            return ex.submit(measure_step, spec).result()
        except cf.process.BrokenProcessPool as err:
            return dict(status='exceeds cap', detail=str(err)[:200])
        except Exception as err:  # noqa: BLE001 (recorded in the results)
            return dict(status=status_of(err))


def measure_step(spec: dict) -> dict:
    r"""One training step, as :func:`fresh_process_step` runs it: the graph
    :obj:`spec['graph']` (:func:`load_graph` with :obj:`channels`,
    :obj:`scale`, :obj:`data_root`) on :obj:`device`; :obj:`layer` (GATE or
    GATv2) under :obj:`kernel`, one layer of width :obj:`hidden` with
    :obj:`heads` (:obj:`concat`), or with :obj:`depth` a :class:`DeepModel`
    of that many layers and :obj:`classes` random labels (cross-entropy).
    On CPU with :obj:`cap_gb > 0` the process may map at most that much
    beyond its imports (:func:`cap_address_space`). Returns the step's
    time, its peak memory (CPU: peak resident size, reset after the graph is
    built; CUDA: peak allocated) and growth, the bytes saved for backward,
    or the status :obj:`'exceeds cap'` / :obj:`'OOM'`."""
    device = torch.device(spec['device'])
    if device.type == 'cpu' and spec.get('cap_gb', 0) > 0:
        cap_address_space(spec['cap_gb'])
    torch.set_num_threads(spec.get('threads', 1))
    res: dict = {}
    model = None
    try:
        x, edge_index = load_graph(
            spec['graph'], spec['channels'], device,
            spec.get('data_root'), spec.get('scale', 1.0),
        )  # fmt: skip
        res.update(num_nodes=x.size(0), num_edges=edge_index.size(1))
        labels = None
        if spec.get('depth'):
            gen = torch.Generator().manual_seed(1)
            labels = torch.randint(
                spec['classes'], (x.size(0),), generator=gen
            ).to(device)
            model = DeepModel(
                spec['layer'],
                x.size(1),
                spec['hidden'],
                spec['heads'],
                spec['depth'],
                spec['classes'],
            )
        else:  # fmt: skip
            model = make_layer(
                spec['layer'],
                x.size(1),
                spec['hidden'],
                spec['heads'],
                spec.get('concat', True),
            )
        model = model.to(device)  # fmt: skip
        step = Step(model, x, edge_index, spec.get('kernel'), labels=labels)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            peak = lambda: torch.cuda.max_memory_allocated(device)  # noqa
        else:
            peak = reset_peak_rss()
            base = peak()
        sync(device)
        t = time.perf_counter()
        saved = saved_bytes(step)
        sync(device)
        res['step_ms'] = 1e3 * (time.perf_counter() - t)
        res['peak_mb'] = peak() / 2**20
        res['step_mb'] = res['peak_mb'] - base / 2**20
        res['saved_mb'] = saved / 2**20
        res['status'] = 'ok'
    except (MemoryError, RuntimeError) as err:
        if not is_oom(err):
            raise
        res['status'] = 'exceeds cap' if device.type == 'cpu' else 'OOM'
        res['detail'] = str(err).splitlines()[0][:200]
        if model is not None and spec.get('depth'):
            done = model.layers_done
            res['detail'] = (
                f'in the forward pass of layer {done + 1}'
                if done < spec['depth']
                else 'in backward'
            )
    return res
