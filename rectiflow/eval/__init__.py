"Measuring samples: distances between sets, the reference classifier, the gauge of your own data."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'metrics': ['frechet_distance', 'w2_exact', 'energy_distance', 'psnr', 'reference_classifier'],
    'gauge': ['DataGauge', 'data_gauge', 'gauge_quality']})
