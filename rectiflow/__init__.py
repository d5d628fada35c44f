"""rectiflow: train flow-matching generative models and the regression models beside them."""
__version__ = "0.1.0"
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from .layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'task': ['Task'],
    'config': ['Config', 'ConfigError', 'ranged'],
    'tasks.registry': ['preset', 'train', 'load_run', 'evaluate_checkpoint', 'register_task'],
    'run.callbacks': ['Callback'],
    'run.trainer': ['Trainer']})
