from .self_loop_attention import self_loop_attention

__all__ = [
    'self_loop_attention',
]
