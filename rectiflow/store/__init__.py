"""What a run writes to disk: atomic writes and manifests, the run directory, exports, checkpoints, model cards."""
# Written by hand, not exported: what this folder offers, each name loaded on first use (`01_layout`).
from ..layout import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    'files': ['read_jsonl', 'write_json_atomic'],
    'rundir': ['run_lock'],
    'exports': ['export_model', 'load_exported_model'],
    'checkpoint': ['read_checkpoint', 'newest_whole', 'resume_point', 'init_source'],
    'cards': ['model_card']})
