from .dirichlet_energy import dirichlet_energy
from .plot_self_attention_histogram import plot_self_attention_histogram
from .plot_self_attention_history import plot_self_attention_history
from .self_attention_recorder import SelfAttentionRecorder
from .self_loop_attention import self_loop_attention

__all__ = [
    'self_loop_attention',
    'SelfAttentionRecorder',
    'plot_self_attention_history',
    'plot_self_attention_histogram',
    'dirichlet_energy',
]
