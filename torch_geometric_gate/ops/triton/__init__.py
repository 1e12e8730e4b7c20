from .op import triton_attention

__all__ = ['triton_attention']
