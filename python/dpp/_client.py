# SPDX-License-Identifier: Apache-2.0
"""dpp.Client: one trainer rank attached to a session (dpp_client_t)."""
import ctypes
import math
from ctypes import c_void_p

from . import _lib, _session
from ._batch import Batch
from ._errors import DppError, DppTimeoutError, EpochEnd, SessionEnd, check

# A wait without a deadline is made of slices this long, so that Python can
# run signal handlers (Ctrl-C) in between.
_SLICE_MS = 1000

_STAT_FIELDS = (
    "batches",
    "rows",
    "wait_ns",
    "bytes_wire",
    "bytes_raw",
    "blocks",
    "blocks_duplicate",
    "reconnects",
    "batches_zero_copy",
    "rows_padded",
)

# DPP_CHECKPOINT_SIZE: a version-2 token, signed with HMAC-SHA256 under the
# session's key (64-byte version-1 tokens of older versions are refused)
CHECKPOINT_SIZE = 96
# DPP_EPOCHS_UNBOUNDED
EPOCHS_UNBOUNDED = 0xFFFFFFFF


class Client:
    """One trainer rank of a dpp session.

    ``Client(master, session, rank=0, world_size=0, prefetch=8,
    memory_budget=256 << 20, timeout_s=10.0, token=None,
    prefetch_splits=4, resume=None, elastic=None)`` attaches to the master at ``master``
    ("HOST:PORT") for session ``session`` (the id ``dppctl submit``
    printed; ``Client(session)`` takes the ``dpp.Session`` that
    ``dpp.submit()`` returned instead); ``timeout_s`` bounds the wait for the master's first answer.
    ``resume`` is a token from ``checkpoint()``: the client continues from
    there (``session`` may then be None). ``elastic`` is the checkpoint
    tokens of every rank of another world size, taken at one step (a list in
    rank order, as ``TorchDataset.state_dict()`` gathers them): the rest of
    their epoch is planned again for ``world_size`` ranks (required), of
    which this client reads ``rank`` (docs/client.md#elastic-resume).
    Raises DppError (``code``
    DPP_ENOSESSION, DPP_ERANK, DPP_ETOKEN, DPP_ETIMEDOUT, -ECONNREFUSED, ...;
    ``detail`` is ``dpp_client_open_error()``: for a refused token, the
    field and what the token and the plan say).

    ``next()`` returns a ``Batch`` or raises ``EpochEnd`` (once after the
    last batch of each epoch) or ``SessionEnd`` (after the last epoch, and on
    every later call). Iterating the client yields every remaining batch of
    every epoch; ``epoch_iter()`` yields the batches of one epoch.

    A client is used from one thread (the one calling next()); batches may be
    dropped or released from any thread. Use it as a context manager, or call
    ``close()``: batches still held stay valid after close.
    """

    def __init__(
        self,
        master,
        session=None,
        rank=0,
        world_size=0,
        prefetch=8,
        memory_budget=256 << 20,
        timeout_s=10.0,
        token=None,
        prefetch_splits=None,
        resume=None,
        elastic=None,
    ):
        self._lib = lib = _lib.load()
        self._ptr = None
        master, session, token = _session.unpack(master, session, token)
        self.master = master
        self.session = session
        self.rank = rank
        o = _lib.ClientOptions()
        lib.dpp_client_options_init(ctypes.byref(o))
        # Keep the encoded strings alive for the call.
        m = _enc(master, "master")
        s = _enc(session, "session") if session is not None else None
        t = _enc(token, "token") if token is not None else None
        o.master, o.session, o.token = m, s, t
        if prefetch_splits is not None:
            o.prefetch_splits = _uint(prefetch_splits, "prefetch_splits")
        if resume is not None:
            if not isinstance(resume, (bytes, bytearray)):
                raise TypeError("resume must be the bytes of a checkpoint token")
            r = ctypes.create_string_buffer(bytes(resume), len(resume))
            o.resume_token, o.resume_token_len = ctypes.cast(r, c_void_p), len(resume)
        if elastic is not None:
            if isinstance(elastic, (bytes, bytearray)):
                blob = bytes(elastic)
            elif all(isinstance(t, (bytes, bytearray)) for t in elastic):
                blob = b"".join(bytes(t) for t in elastic)
            else:
                raise TypeError("elastic must be the old world's checkpoint tokens: a list of "
                                "bytes in rank order")
            e = ctypes.create_string_buffer(blob, len(blob))
            o.elastic_tokens, o.elastic_tokens_len = ctypes.cast(e, c_void_p), len(blob)
        o.rank = _uint(rank, "rank")
        o.world_size = _uint(world_size, "world_size")
        if prefetch is not None:
            o.prefetch = _uint(prefetch, "prefetch")
        if memory_budget is not None:
            if memory_budget < 0:
                raise ValueError("memory_budget must be >= 0")
            o.memory_budget = int(memory_budget)
        if timeout_s is not None:
            o.connect_timeout_ms = _ms(timeout_s)
        out = ctypes.c_void_p()
        rc = lib.dpp_client_open_opts(ctypes.byref(out), ctypes.byref(o))
        if rc < 0:
            raise _open_error(lib, rc, session, rank)
        self._ptr = out.value
        p = self._ptr
        self.dense_names = [
            lib.dpp_client_dense_name(p, i).decode() for i in range(lib.dpp_client_num_dense(p))
        ]
        self.dense_dims = [lib.dpp_client_dense_dim(p, i) for i in range(len(self.dense_names))]
        self.sparse_names = [
            lib.dpp_client_sparse_name(p, i).decode() for i in range(lib.dpp_client_num_sparse(p))
        ]
        self.sparse_weighted = [
            bool(lib.dpp_client_sparse_weighted(p, i)) for i in range(len(self.sparse_names))
        ]
        self._sparse_index = {k: i for i, k in enumerate(self.sparse_names)}
        label = lib.dpp_client_label_name(p)
        # None: the spec has no label, and batches' labels are None
        self.label_name = label.decode() if label is not None else None
        # a mixture's sources (their tables, in spec order); [] for one table
        self.sources = [
            lib.dpp_client_source_name(p, i).decode()
            for i in range(lib.dpp_client_num_sources(p))
        ]
        self.batch_size = int(lib.dpp_client_batch_size(p))
        n = int(lib.dpp_client_num_epochs(p))
        # None: "epochs": "unbounded", epochs until the session is cancelled
        self.num_epochs = None if n == EPOCHS_UNBOUNDED else n
        self._session_done = False

    # ---- life ----------------------------------------------------------

    def close(self):
        """Stops the client's I/O. Batches still held stay valid until they
        are released (or collected). Idempotent."""
        p, self._ptr = self._ptr, None
        if p:
            self._lib.dpp_client_close(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self):
        return self._ptr is None

    def _p(self):
        if self._ptr is None:
            raise ValueError("dpp.Client is closed")
        return self._ptr

    def _error_text(self):
        if self._ptr is None:
            return ""
        return self._lib.dpp_client_error(self._ptr).decode("utf-8", "replace")

    # ---- batches -------------------------------------------------------

    def next(self, timeout_s=None):
        """The next batch of this rank (a Batch).

        Raises EpochEnd after the last batch of an epoch, SessionEnd after
        the last epoch, DppTimeoutError when ``timeout_s`` (None: no limit)
        passes first (the client stays usable), DppError otherwise (then
        ``e.detail`` holds ``dpp_client_error()``)."""
        p = self._p()
        lib = self._lib
        out = ctypes.c_void_p()
        epoch = lib.dpp_client_epoch(p)
        if timeout_s is None:
            while True:
                rc = lib.dpp_client_next(p, ctypes.byref(out), _SLICE_MS)
                if rc != _lib.ERRORS["DPP_ETIMEDOUT"]:
                    break
        else:
            rc = lib.dpp_client_next(p, ctypes.byref(out), _ms(timeout_s))
        if rc == _lib.DPP_BATCH:
            return Batch(self, out.value)
        if rc == _lib.DPP_EPOCH_END:
            raise EpochEnd(epoch)
        if rc == _lib.DPP_SESSION_END:
            self._session_done = True
            raise SessionEnd()
        check(rc, "dpp_client_next", self)
        raise DppError(rc, "dpp_client_next")  # a positive result this package does not know

    def epoch_iter(self, timeout_s=None):
        """Yields the batches of the current epoch; ends at its EpochEnd, or at
        once when the session is over."""
        while True:
            try:
                b = self.next(timeout_s)
            except (EpochEnd, SessionEnd):
                return
            yield b
            del b

    def __iter__(self):
        """Every remaining batch of every epoch (epoch ends are skipped)."""
        while True:
            try:
                b = self.next()
            except EpochEnd:
                continue
            except SessionEnd:
                return
            yield b
            del b

    @property
    def session_done(self):
        """True once next() has raised SessionEnd."""
        return self._session_done

    # ---- state ---------------------------------------------------------

    def checkpoint(self):
        """A data checkpoint token (bytes) for the current batch boundary: a
        Client opened with ``resume=`` it gets exactly the batches this one
        has not handed out yet, in the same order. Needs the spec's order
        "deterministic" (the default); DppError DPP_EINVAL otherwise."""
        buf = ctypes.create_string_buffer(CHECKPOINT_SIZE)  # what the library writes
        n = self._lib.dpp_client_checkpoint(self._p(), buf, CHECKPOINT_SIZE)
        check(n if n < 0 else 0, "dpp_client_checkpoint", self)
        return buf.raw[:n]

    @property
    def epoch(self):
        """The epoch the next batch belongs to (0-based)."""
        return int(self._lib.dpp_client_epoch(self._p()))

    @property
    def epoch_batches(self):
        """Batches this rank gets in the current epoch, or None while unknown."""
        n = int(self._lib.dpp_client_epoch_batches(self._p()))
        return None if n < 0 else n

    @property
    def error(self):
        """dpp_client_error(): why the client failed, or ""."""
        return self._error_text()

    def stats(self):
        """Counters since open (dpp_client_stats_t) as a dict: batches, rows,
        wait_ns, wait_hist (16 counts: bucket i counts next() waits under
        2^i * 10 us, the last every longer one), bytes_wire, bytes_raw,
        blocks, blocks_duplicate, reconnects, batches_zero_copy,
        rows_padded."""
        st = _lib.ClientStats()
        self._lib.dpp_client_get_stats(self._p(), ctypes.byref(st))
        d = {k: int(getattr(st, k)) for k in _STAT_FIELDS}
        d["wait_hist"] = [int(x) for x in st.wait_hist]
        return d

    def __repr__(self):
        return "dpp.Client(master=%r, session=%r, rank=%d%s)" % (
            self.master,
            self.session,
            self.rank,
            ", closed" if self.closed else "",
        )


def _open_error(lib, rc, session, rank):
    """The DppError of a failed open, with dpp_client_open_error() as its
    detail (the field of a refused checkpoint token, the master's words,
    what to do about a master that does not answer)."""
    try:
        detail = lib.dpp_client_open_error().decode("utf-8", "replace")
    except AttributeError:  # a library older than the package
        detail = ""
    cls = DppTimeoutError if rc == _lib.ERRORS["DPP_ETIMEDOUT"] else DppError
    return cls(rc, "dpp_client_open_opts", detail, session=session, rank=rank)


def _enc(s, what):
    if isinstance(s, bytes):
        b = s
    elif isinstance(s, str):
        b = s.encode()
    else:
        raise TypeError("%s must be a str, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise ValueError("%s must not contain NUL" % what)
    return b


def _uint(v, what):
    v = int(v)
    if not 0 <= v < 2**32:
        raise ValueError("%s must be in 0..2^32-1, got %d" % (what, v))
    return v


def _ms(seconds):
    """Seconds (a number >= 0) as whole milliseconds, rounded up, capped."""
    if seconds < 0 or math.isnan(seconds):
        raise ValueError("a timeout must be >= 0 seconds (None: no limit)")
    return int(min(math.ceil(seconds * 1000), 2**31 - 1))


__all__ = ["Client", "DppError", "DppTimeoutError", "EpochEnd", "SessionEnd"]
