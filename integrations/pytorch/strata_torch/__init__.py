"""strata_torch: strata as a torch.distributed backend.

    import strata_torch            # registers the backend
    torch.distributed.init_process_group("strata", ...)

CPU tensors only; CUDA tensors take backend "nccl" with strata's libnccl.so.2.
"""
import torch
import torch.distributed as dist

from . import _C

__all__ = ["create_process_group", "version"]

version = _C.version


def create_process_group(store, rank, size, timeout):
    """The creator torch.distributed calls for backend "strata" (also for every new_group)."""
    return _C.create_process_group(store, rank, size, timeout)


if "STRATA" not in dist.Backend._plugins:
    dist.Backend.register_backend("strata", create_process_group)
