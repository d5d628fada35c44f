"The built-in tasks and the registry that names them (`train`, `load_run`: `rectiflow.api`)."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'registry': ['register_task', 'preset', 'make_task', 'load_checkpoint', 'task_names'],
    'flow': ['FlowTask'],
    'latents': ['VAETask', 'LatentDigitsTask'],
    'filler': ['FillerTask'],
    'lines': ['LinesTask'],
    'sequences': ['SequencesTask'],
    'reflow': ['ReflowTask'],
    'distill': ['DistillTask']})
