import hashlib
import os
import pathlib
import sys
import tempfile

# The test modules share small helpers (`conv_testing`) from this folder:
sys.path.insert(0, os.path.dirname(__file__))


def _inductor_cache_dir() -> str:
    # PyTorch's compile caches are keyed on the traced graph, which names a
    # custom operator but not its schema or fake implementation
    # (pytorch/pytorch#160472): a compiled graph cached by another version
    # of this package's operators (another checkout, an earlier commit)
    # loads for these and fails. One cache per content of `ops/`:
    ops = pathlib.Path(__file__).parents[1] / 'torch_geometric_gate' / 'ops'
    digest = hashlib.sha256()
    for path in sorted(ops.rglob('*.py')):
        digest.update(path.read_bytes())
    name = f'torchinductor_gate_{digest.hexdigest()[:12]}'
    return os.path.join(tempfile.gettempdir(), name)


os.environ.setdefault('TORCHINDUCTOR_CACHE_DIR', _inductor_cache_dir())

# Without a GPU the Triton kernels run under Triton's interpreter, which
# must be chosen before anything (torch.compile too) imports Triton:
if 'TRITON_INTERPRET' not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ['TRITON_INTERPRET'] = '1'

# Eager calls on CPU tensors run Inductor-compiled loops
# (`ops/chunked/loops.py`), whose first call per setting compiles for
# seconds: the suite's many settings would take an hour. Its eager calls run
# the chunked ATen loops; the tests of the compiled eager path select them
# with `attention_kernel(eager_loops=True)`.
import pytest  # noqa: E402

from torch_geometric_gate.ops import attention_kernel  # noqa: E402


@pytest.fixture(autouse=True)
def _chunked_aten_loops_when_eager(request):
    block = attention_kernel(eager_loops=False)
    block.__enter__()
    request.addfinalizer(lambda: block.__exit__(None, None, None))
