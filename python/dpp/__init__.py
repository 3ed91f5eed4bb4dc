# SPDX-License-Identifier: Apache-2.0
"""dpp: train from a dpp session in PyTorch.

A ctypes binding of libdppclient (include/dpp/client.h); batches come as
torch tensors that view the library's memory without a copy::

    import dpp
    session = dpp.submit("spec.json", master="127.0.0.1:7070")   # or a dict
    with dpp.Client(session) as c:
        for batch in c:                      # every batch of every epoch
            batch.labels                     # float32 [B]; None: the spec has no label
            batch.dense                      # float32 [B, D], spec order (D may be 0)
            batch.sparse["c1"].values        # int64 ids of feature c1
            batch.sparse.offsets             # KJT layout (to_kjt() with torchrec)
            batch.text.input_ids             # text sessions: int64 [B, L], labels,
                                             # position_ids, cu_seqlens (see Text)

    loader = torch.utils.data.DataLoader(dpp.TorchDataset(session),
                                         batch_size=None, pin_memory=True)
    session.status()["state"]                # dppctl status -o json, as a dict
    session.cancel()

The library is found through DPP_LIB (a path), else <source>/build next to
this package, else the dynamic linker (see dpp._lib). docs/client.md has the
whole story.
"""
from ._batch import Batch, Jagged, Sparse, TensorBatch, Text
from ._client import CHECKPOINT_SIZE, Client
from ._dataset import WORKERS_MESSAGE, TorchDataset, WorkerProcessError, resolve_rank
from ._errors import DppError, DppTimeoutError, EndOfData, EpochEnd, SessionEnd
from ._lib import ERRORS, library_path
from ._session import Session, cancel, status, submit

__version__ = "0.1.0"

# DPP_E* error numbers as module constants: dpp.DPP_ENOSESSION == -1007.
globals().update(ERRORS)


def strerror(code):
    """dpp_strerror(code)."""
    from . import _lib

    return _lib.load().dpp_strerror(int(code)).decode("utf-8", "replace")


__all__ = [
    "Batch",
    "CHECKPOINT_SIZE",
    "Client",
    "DppError",
    "DppTimeoutError",
    "EndOfData",
    "EpochEnd",
    "Jagged",
    "Session",
    "SessionEnd",
    "Sparse",
    "TensorBatch",
    "Text",
    "TorchDataset",
    "cancel",
    "WORKERS_MESSAGE",
    "WorkerProcessError",
    "library_path",
    "resolve_rank",
    "status",
    "strerror",
    "submit",
]  # and the DPP_E* constants, set above
