r"""Compiles GATE's Triton kernels for GPU targets without a GPU: Triton's
own compiler down to PTX and, with the ``ptxas`` that Triton ships, a
cubin. ``test_triton.py`` runs it (without ``TRITON_INTERPRET``) on the
launches it recorded under the interpreter, so that a construct that the
interpreter accepts but a GPU compiler rejects fails on a CPU too::

    python test/ops/_compile_triton.py LAUNCHES.json 90 80

``LAUNCHES.json``: a list of ``{"kernel", "signature", "constants"}``;
then the compute capabilities to compile for.
"""

import json
import sys


def main(path, capabilities):
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from torch_geometric_gate.ops import _triton_kernels as kernels

    with open(path) as f:
        launches = json.load(f)
    for launch in launches:
        fn = getattr(kernels, launch['kernel'])
        for capability in capabilities:
            source = ASTSource(fn, launch['signature'], launch['constants'])
            try:
                compiled = triton_compile(
                    source, target=GPUTarget('cuda', capability, 32)
                )
            except Exception as e:
                sys.exit(
                    f'{launch["kernel"]} with {launch["constants"]} does not '
                    f'compile for sm_{capability}: {type(e).__name__}: {e}'
                )
            if not compiled.asm.get('cubin'):
                sys.exit(f'{launch["kernel"]}: no cubin for sm_{capability}')
    print(f'compiled {len(launches)} launches for {len(capabilities)} targets')


if __name__ == '__main__':
    main(sys.argv[1], [int(c) for c in sys.argv[2:]])
