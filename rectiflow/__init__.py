"""rectiflow: train flow-matching generative models and the regression models beside them."""
__version__ = "0.1.0"
# Written by hand, not exported: what this folder offers, each name loaded on first use, and the module paths
# of older versions kept working (`01_layout`).
from .layout import lazy_names, keep_old_paths

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'api': ['train', 'task_trainer', 'load_run', 'evaluate_checkpoint'],
    'tasks.registry': ['preset', 'register_task', 'make_task', 'load_checkpoint'],
    'config': ['Config', 'ConfigError', 'ranged', 'FlowConfig', 'EvalConfig', 'apply_overrides'],
    'task': ['Task'],
    'data.batches': ['DataInfo', 'TensorItems', 'FetchedItems', 'collate_items'],
    'flow.objective': ['FlowMatching', 'drop_condition', 'check_velocity_model'],
    'tasks.flow': ['image_grid', 'sample_grid', 'sampler_words'],
    'run.callbacks': ['Callback', 'Extension'],
    'run.trainer': ['Trainer'],
    'tools.gates': ['run_gates'],
    'store.files': ['read_jsonl'],
    'ui.widgets': ['LossCurves', 'SampleGrid']})
keep_old_paths(__name__)
