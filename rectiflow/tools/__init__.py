"Tools that read run directories and talk to a task: the LR range test, the NFE sweep, the gates."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'lr_find': ['lr_find'],
    'sweep': ['nfe_sweep', 'read_sweep'],
    'gates': ['run_gates', 'read_gates']})
