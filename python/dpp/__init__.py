# SPDX-License-Identifier: Apache-2.0
"""dpp: train from a dpp session in PyTorch.

A ctypes binding of libdppclient (include/dpp/client.h); batches come as
torch tensors that view the library's memory without a copy::

    import dpp
    with dpp.Client("127.0.0.1:7070", session) as c:
        for batch in c:                      # every batch of every epoch
            batch.labels                     # float32 [B]; None: the spec has no label
            batch.dense                      # float32 [B, D], spec order (D may be 0)
            batch.sparse["c1"].values        # int64 ids of feature c1
            batch.sparse.offsets             # KJT layout (to_kjt() with torchrec)
            batch.text.input_ids             # text sessions: int64 [B, L], labels,
                                             # position_ids, cu_seqlens (see Text)

    loader = torch.utils.data.DataLoader(dpp.TorchDataset(master, session),
                                         batch_size=None, pin_memory=True)

The library is found through DPP_LIB (a path), else <source>/build next to
this package, else the dynamic linker (see dpp._lib). docs/client.md has the
whole story.
"""
from ._batch import Batch, Jagged, Sparse, TensorBatch, Text
from ._client import CHECKPOINT_SIZE, Client
from ._dataset import WORKERS_MESSAGE, TorchDataset, resolve_rank
from ._errors import DppError, DppTimeoutError, EndOfData, EpochEnd, SessionEnd
from ._lib import ERRORS, library_path

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
    "SessionEnd",
    "Sparse",
    "TensorBatch",
    "Text",
    "TorchDataset",
    "WORKERS_MESSAGE",
    "library_path",
    "resolve_rank",
    "strerror",
]  # and the DPP_E* constants, set above
