import os
import sys

# The test modules share small helpers (`conv_testing`) from this folder:
sys.path.insert(0, os.path.dirname(__file__))

# Without a GPU the Triton kernels run under Triton's interpreter, which
# must be chosen before anything (torch.compile too) imports Triton:
if 'TRITON_INTERPRET' not in os.environ:
    import torch

    if not torch.cuda.is_available():
        os.environ['TRITON_INTERPRET'] = '1'
