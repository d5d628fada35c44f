"The built-in tasks and the registry that names them: `train`, `evaluate_checkpoint`, `load_run`."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'registry': ['register_task', 'preset', 'train', 'evaluate_checkpoint', 'load_run', 'task_names'],
    'flow': ['FlowTask'],
    'latents': ['VAETask', 'LatentDigitsTask'],
    'filler': ['FillerTask'],
    'lines': ['LinesTask'],
    'sequences': ['SequencesTask'],
    'reflow': ['ReflowTask']})
