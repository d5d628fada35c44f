"Widgets over run directories: loss curves, samples, the LR range test, the gate board, run comparison."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'widgets': ['LossCurves', 'SampleGrid', 'LRFinder', 'GateBoard', 'NFESweep', 'RunComparison']})
