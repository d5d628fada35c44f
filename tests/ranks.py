"""The end of a test script run by torchrun: every rank leaves the process group before the interpreter exits. A rank that
exits while gloo's threads live aborts ("terminate called without an active exception"), and that abort hides the
Python error that ended it; a rank that fails still leaves the group, so its traceback is what the test shows."""
from contextlib import contextmanager
import torch

@contextmanager
def ranks_ended():
    "Run the script's body; then wait for every rank (when it succeeded) and leave the process group either way."
    succeeded = False
    try:
        yield
        succeeded = True
    finally:
        if torch.distributed.is_initialized():
            if succeeded: torch.distributed.barrier()        # every rank done with its pairs before any tears them down
            torch.distributed.destroy_process_group()

def workers_said(p) -> str:
    "A failed torchrun's stderr: its workers' own errors (at the start) and torchrun's report of them (at the end)."
    err = p.stderr
    return err if len(err) <= 6000 else f"{err[:3000]}\n[...]\n{err[-3000:]}"
