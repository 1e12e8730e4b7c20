from .op import chunked_attention

__all__ = ['chunked_attention']
