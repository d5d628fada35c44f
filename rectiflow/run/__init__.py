"""Driving a task: the Trainer, callbacks and extensions (EMA, throughput, sharding, LoRA, REPA), the checkpoint's
parts, evaluations, the lifecycle of a run."""
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`); the names it
# offered from the modules that joined the store (`MOVED_NAMES`) still answer, with a warning.
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'trainer': ['Trainer'],
    'callbacks': ['Callback', 'Extension'],
    'ema': ['EMA'],
    'throughput': ['Throughput'],
    'lora': ['LoRA']})
