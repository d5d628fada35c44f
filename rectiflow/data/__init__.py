"Data readers: batches and samplers, the embedded sets, image files, Hugging Face datasets, latent shards."
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'batches': ['DataInfo', 'TensorItems', 'make_loader', 'fingerprint', 'DataError'],
    'embedded': ['digits_split', 'toy_2d'],
    'files': ['ImageOptions', 'image_datasets'],
    'hf': ['HFOptions', 'hf_datasets'],
    'shards': ['ShardWriter', 'LatentShards']})
