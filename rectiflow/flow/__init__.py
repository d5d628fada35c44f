"The flow-matching core: the networks, the objectives (flow matching, the mean velocity), samplers, the VAE."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'models': ['make_model', 'MODEL_CLASSES'],
    'objective': ['FlowMatching'],
    'meanflow': ['MeanFlow'],
    'sampling': ['SOLVERS', 'integrate', 'generate'],
    'vae': ['load_vae', 'encode_latents', 'decode_latents']})
