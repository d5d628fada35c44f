"""Driving a task: the Trainer, callbacks and extensions (EMA, throughput, sharding, LoRA, REPA), checkpoints, exports,
cards."""
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'trainer': ['Trainer'],
    'callbacks': ['Callback'],
    'ema': ['EMA'],
    'throughput': ['Throughput'],
    'checkpoint': ['read_checkpoint', 'newest_whole'],
    'exports': ['export_model', 'load_exported_model'],
    'lora': ['LoRA'],
    'cards': ['model_card']})
