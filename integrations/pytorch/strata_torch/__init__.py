"""strata_torch: strata as a torch.distributed backend.

    import strata_torch            # registers the backend
    torch.distributed.init_process_group("strata", ...)          # or "cpu:strata,cuda:nccl"

PyTorch 2.x: a c10d Backend registered for CPU tensors (devices=["cpu"]), so that a group mixes it
with another backend for CUDA tensors ("cpu:strata,cuda:nccl"); PyTorch 1.13: a ProcessGroup.
CUDA tensors take backend "nccl" with strata's libnccl.so.2.
"""
import inspect

import torch
import torch.distributed as dist

from . import _C

__all__ = ["create_backend", "shutdown", "abort", "is_shut_down", "version", "DEVICES"]

version = _C.version
shutdown = _C.shutdown  # shutdown(group): drain, then free; idempotent
abort = _C.abort  # abort(group): stop what runs or is queued (it raises), then free; idempotent
is_shut_down = _C.is_shut_down

# The devices the backend takes tensors on.
DEVICES = ["cpu"]


def create_backend(store, rank, size, timeout):
    """The creator torch.distributed calls for backend "strata" (also for every new_group)."""
    return _C.create_backend(store, rank, size, timeout)


if "STRATA" not in dist.Backend._plugins:
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:  # torch >= 2.0
        dist.Backend.register_backend("strata", create_backend, devices=DEVICES)
    else:
        dist.Backend.register_backend("strata", create_backend)
