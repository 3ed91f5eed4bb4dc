# SPDX-License-Identifier: Apache-2.0
"""dpp.TorchDataset: a dpp session as a torch IterableDataset."""
import os

import torch.distributed
import torch.utils.data

from ._client import Client
from . import _lib, _session
from ._errors import DppError, EpochEnd, SessionEnd

WORKERS_MESSAGE = (
    "dpp.TorchDataset reads with DataLoader(dataset, batch_size=None, num_workers=0) only "
    "(pin_memory=True is fine): its batches come preprocessed from the session's dpp-worker "
    "daemons, each trainer rank reads them through one client, and batches fetched ahead "
    "in worker processes would be lost to checkpoints."
)


class WorkerProcessError(RuntimeError):
    """A TorchDataset iterated in a DataLoader worker process (num_workers > 0).

    Its message is WORKERS_MESSAGE, one sentence, also where the DataLoader
    raises it again in the trainer: torch builds the exception anew from a
    text that holds the worker's whole traceback, which this class drops, so
    the trainer's error names the cause and the fix in one line."""

    def __init__(self, *_ignored):
        super().__init__(WORKERS_MESSAGE)


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError("%s=%r is not a rank number (expected an integer >= 0)" % (name, v))
    return n


def resolve_rank(rank=None, world_size=None):
    """(rank, world_size, where they came from), torch's way: explicit
    arguments win; else torch.distributed when it is initialized; else the
    RANK (or LOCAL_RANK) and WORLD_SIZE variables torchrun sets; else rank
    0 of 1. world_size 0 (given explicitly) skips the check against the
    spec's "consumers"."""
    src = []
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            if rank is None:
                rank = torch.distributed.get_rank()
            if world_size is None:
                world_size = torch.distributed.get_world_size()
            src.append("torch.distributed")
    if rank is None:
        for name in ("RANK", "LOCAL_RANK"):
            rank = _env_int(name)
            if rank is not None:
                src.append(name)
                break
    if world_size is None:
        world_size = _env_int("WORLD_SIZE")
        if world_size is not None:
            src.append("WORLD_SIZE")
    if rank is None:
        rank = 0
    if world_size is None:
        world_size = 1
    return rank, world_size, ", ".join(src) or "the arguments and defaults"


class TorchDataset(torch.utils.data.IterableDataset):
    """The batches of one dpp session rank, one epoch per iteration::

        ds = dpp.TorchDataset(master, session, rank=0)  # or TorchDataset(dpp.submit(spec))
        loader = DataLoader(ds, batch_size=None, num_workers=0, pin_memory=True)
        for epoch in range(ds.num_epochs):
            for batch in loader:  # the batches of one epoch
                ...

    ``iter(ds)`` yields the ``Batch``es of the current epoch and ends at its
    end; after the session's last epoch an iteration ends at once. Breaking
    out of an epoch early leaves its remaining batches to the next
    iteration. The batches are already batched (``batch_size=None`` in the
    DataLoader). The client is opened at the first iteration (or on the
    first access to ``client``) with the keyword arguments of dpp.Client;
    ``next_timeout_s`` bounds each wait for a batch (None: no limit).

    ``rank`` and ``world_size`` default to torch.distributed's when it is
    initialized, else to the RANK (or LOCAL_RANK) and WORLD_SIZE variables
    of torchrun, else to 0 and 1 (see resolve_rank); a world size other
    than the spec's "consumers" raises DppError (DPP_ERANK) naming both
    (pass world_size=0 to read one rank of a larger session by hand).
    ``len(ds)`` is the current epoch's batch count, when the plan makes it
    known (a spec without filters); else it raises TypeError.

    Each rank reads with ``num_workers=0``: in a DataLoader worker process
    ``iter()`` raises WorkerProcessError, a RuntimeError whose message is
    WORKERS_MESSAGE, and so does the DataLoader in the trainer.
    """

    def __init__(self, master, session=None, rank=None, world_size=None, next_timeout_s=None,
                 **client_kwargs):
        super().__init__()
        master, session, token = _session.unpack(master, session, client_kwargs.get("token"))
        if token is not None:
            client_kwargs["token"] = token
        self.master = master
        self.session = session
        self.rank, self.world_size, self.rank_source = resolve_rank(rank, world_size)
        self.next_timeout_s = next_timeout_s
        self._client_kwargs = client_kwargs
        self._client = None

    @property
    def client(self):
        """The dpp.Client (opened on first use)."""
        if self._client is None:
            try:
                self._client = Client(
                    self.master,
                    self.session,
                    rank=self.rank,
                    world_size=self.world_size,
                    **self._client_kwargs,
                )
            except DppError as e:
                if e.code != _lib.ERRORS["DPP_ERANK"]:
                    raise
                raise DppError(
                    e.code,
                    e.call,
                    "%s (rank %d and world_size %d came from %s)"
                    % (e.detail or e.strerror, self.rank, self.world_size, self.rank_source),
                    e.session,
                    e.rank,
                ) from None
            except AttributeError as e:
                # Inside a property, an AttributeError would turn into "no
                # attribute 'client'" (torch's Dataset.__getattr__).
                raise RuntimeError(str(e)) from e
        return self._client

    @property
    def num_epochs(self):
        """The session's epochs, None when "unbounded" (until cancelled)."""
        return self.client.num_epochs

    @property
    def batch_size(self):
        return self.client.batch_size

    def __len__(self):
        n = self.client.epoch_batches
        if n is None:
            raise TypeError(
                "len(): the batches of epoch %d of session %s are not known yet (the spec has "
                "filters, or the session is still indexing); iterate to count them"
                % (self.client.epoch, self.session)
            )
        return n

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise WorkerProcessError()
        return self._epoch(self.client)

    def _epoch(self, client):
        timeout = self.next_timeout_s
        while True:
            try:
                b = client.next(timeout)
            except (EpochEnd, SessionEnd):
                return
            yield b
            del b  # the generator must not hold the last batch between steps

    def state_dict(self, gather=None):
        """The data position, to save with the model's checkpoint:
        ``{"dpp_token": bytes}`` for the current batch boundary (every batch
        this dataset yielded so far counts as delivered; with num_workers=0
        the DataLoader fetches nothing ahead), or the position a loaded
        state_dict will start from, or {} before anything was read.

        With ``gather`` (default: when torch.distributed is initialized and
        the world has more than one rank) every rank's token is gathered
        too, as ``"dpp_tokens"`` (a list in rank order): a collective call,
        made by every rank at the same step. Rank 0's state_dict is then
        enough to resume at any world size (load_state_dict)."""
        if self._client is not None:
            tok = self._client.checkpoint()
        else:
            tok = self._client_kwargs.get("resume")
        state = {} if tok is None else {"dpp_token": tok}
        dist = torch.distributed
        if gather is None:
            gather = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if gather:
            tokens = [None] * dist.get_world_size()
            dist.all_gather_object(tokens, tok)
            if any(t is None for t in tokens):
                raise RuntimeError("state_dict(gather=True): rank %d has no position yet"
                                   % tokens.index(None))
            state["dpp_tokens"] = tokens
        return state

    def load_state_dict(self, state):
        """Continues from a ``state_dict()``, also in a new process: the next
        iterations yield exactly the batches that were not yet delivered at
        that point, the same ones in the same order. Closes the current
        client; the next iteration opens one at that position.

        A state with ``"dpp_tokens"`` of another world size than this
        dataset's (an elastic resume: say 8 ranks checkpointed, 6 resume)
        re-plans the rest of the epoch for this world: over the epoch every
        row is delivered exactly once in total, and the ranks get equal
        batches from here on (docs/guarantees.md#elastic-resume). Every rank
        of the new world loads the same state."""
        tokens = state.get("dpp_tokens")
        self.close()
        self._client_kwargs.pop("resume", None)
        self._client_kwargs.pop("elastic", None)
        if tokens is not None and len(tokens) != self.world_size:
            self._client_kwargs["elastic"] = [bytes(t) for t in tokens]
            return
        tok = tokens[self.rank] if tokens is not None else state.get("dpp_token")
        if tok is not None:
            self._client_kwargs["resume"] = bytes(tok)

    def close(self):
        """Closes the client. Batches still held stay valid."""
        c, self._client = self._client, None
        if c is not None:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        # Pickled for DataLoader worker processes (spawn): the client stays here.
        d = dict(self.__dict__)
        d["_client"] = None
        return d
