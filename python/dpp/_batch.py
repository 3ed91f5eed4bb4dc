# SPDX-License-Identifier: Apache-2.0
"""Batches as torch tensors.

A ``Batch`` wraps one ``dpp_batch_t``: its tensors are views of the library's
memory, made without a copy (NumPy's ``__array_interface__`` over the pointers
the accessors return, then ``torch.from_numpy``). Every view holds a reference
to a small handle object, and the handle calls ``dpp_batch_release()`` when
the last of them (the Batch, any tensor viewing it, any slice of such a
tensor) is gone. ``Batch.release()`` releases early.

``pin_memory()`` and ``to()`` return a ``TensorBatch``: the same fields, held
in tensors of their own (the library's memory is no longer referenced).
"""
import ctypes
import threading

import numpy as np
import torch

from . import _lib
from ._errors import check

_release_lock = threading.Lock()


class _Handle:
    """Owns one dpp_batch_t; releases it when collected or on release()."""

    __slots__ = ("ptr", "_lib", "__weakref__")

    def __init__(self, ptr, lib):
        self.ptr = ptr
        self._lib = lib

    @property
    def released(self):
        return self.ptr is None

    def release(self):
        with _release_lock:
            p, self.ptr = self.ptr, None
        if p:
            self._lib.dpp_batch_release(p)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: the process is going anyway
            pass


class _View:
    """What NumPy wraps: an __array_interface__ over library memory, plus the
    handle, so the array (NumPy keeps this object as the array's base) keeps
    the batch alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, addr, shape, typestr, owner):
        self.__array_interface__ = {
            "data": (addr, False),
            "shape": shape,
            "typestr": typestr,
            "version": 3,
        }
        self.owner = owner


def _view(owner, addr, shape, typestr, dtype):
    """A tensor of `shape` over the memory at addr, without a copy."""
    n = 1
    for s in shape:
        n *= s
    if n == 0 or not addr:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(np.asarray(_View(addr, shape, typestr, owner)))


class Jagged:
    """One sparse feature of a batch: ``values`` (int64, every row's ids back
    to back), ``lengths`` (int32 [rows]), ``offsets`` (int32 [rows + 1], from
    0: row r holds ``values[offsets[r]:offsets[r + 1]]``) and ``weights``
    (float32 parallel to values, or None).

    For ``nn.EmbeddingBag``: ``bag(j.values, j.offsets[:-1].long())``, or
    ``include_last_offset=True`` with ``j.offsets.long()``."""

    __slots__ = ("values", "lengths", "offsets", "weights")

    def __init__(self, values, lengths, offsets, weights):
        self.values = values
        self.lengths = lengths
        self.offsets = offsets
        self.weights = weights

    def __repr__(self):
        return "Jagged(rows=%d, values=%d)" % (self.lengths.numel(), self.values.numel())


class Sparse:
    """Every sparse feature of a batch in TorchRec KeyedJaggedTensor layout
    (``dpp_batch_kjt``): ``keys`` (spec order), ``values`` int64 [nvalues]
    key-major, ``lengths`` int32 [keys * stride], ``offsets`` int32
    [keys * stride + 1] (prefix sums of lengths), ``weights`` float32
    [nvalues] or None (when no feature is weighted), ``stride`` = rows.

    ``sparse[key]`` gives one feature as a ``Jagged`` (views, except its
    offsets, which are rebased to 0: a small copy of rows + 1 int32s)."""

    __slots__ = ("keys", "values", "lengths", "offsets", "weights", "stride", "_index")

    def __init__(self, keys, values, lengths, offsets, weights, stride, index=None):
        self.keys = keys
        self.values = values
        self.lengths = lengths
        self.offsets = offsets
        self.weights = weights
        self.stride = stride
        self._index = index if index is not None else {k: i for i, k in enumerate(keys)}

    def __len__(self):
        return len(self.keys)

    def __iter__(self):
        return iter(self.keys)

    def __contains__(self, key):
        return key in self._index

    def __getitem__(self, key):
        k = self._index[key] if not isinstance(key, int) else key
        if not 0 <= k < len(self.keys):
            raise IndexError(key)
        b = self.stride
        start = int(self.offsets[k * b])
        end = int(self.offsets[(k + 1) * b])
        offsets = self.offsets[k * b : (k + 1) * b + 1]
        if start:
            offsets = offsets - start
        w = None if self.weights is None else self.weights[start:end]
        return Jagged(self.values[start:end], self.lengths[k * b : (k + 1) * b], offsets, w)

    def items(self):
        for k in self.keys:
            yield k, self[k]

    def to_kjt(self):
        """The batch's sparse features as a
        ``torchrec.sparse.jagged_tensor.KeyedJaggedTensor`` (its tensors are
        these ones: no copy). Needs torchrec."""
        try:
            from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
        except ImportError as e:
            raise ImportError(
                "Sparse.to_kjt() needs torchrec, which is not importable here (%s); install "
                "it (pip install torchrec), or use the KJT fields directly: sparse.keys, "
                ".values, .lengths, .offsets, .weights, .stride" % e
            ) from e
        return KeyedJaggedTensor(
            keys=list(self.keys),
            values=self.values,
            weights=self.weights,
            lengths=self.lengths,
            offsets=self.offsets,
            stride=self.stride,
        )

    def _map(self, fn):
        return Sparse(
            self.keys,
            fn(self.values),
            fn(self.lengths),
            fn(self.offsets),
            None if self.weights is None else fn(self.weights),
            self.stride,
            self._index,
        )

    def __repr__(self):
        return "Sparse(keys=%d, stride=%d, values=%d, weighted=%s)" % (
            len(self.keys),
            self.stride,
            self.values.numel(),
            self.weights is not None,
        )

TEXT_KEYS = ("input_ids", "labels", "position_ids", "cu_seqlens")


class Text:
    """A text session's batch (spec format "jsonl"): ``rows`` packed
    sequences of ``length`` tokens.

    Attributes:
        input_ids: int64 [rows, length] token ids (a view of the batch).
        labels: int64 [rows, length]: the next token of the same document,
            -100 where there is none (a document's last token, padding):
            ``cross_entropy(logits.view(-1, V), labels.view(-1))`` as is.
        position_ids: int64 [rows, length]: the token's place in its document.
        cu_seqlens: int32 [segments + 1]: where each document piece starts in
            the flattened rows * length tokens, from 0 to rows * length, every
            row boundary included: the layout variable-length attention
            kernels take (flash_attn_varlen_func). Built per batch (a copy).
        row_cu_seqlens: ``Jagged`` of each row's own boundaries, 0 .. length.
        padding: float32 [rows]: padded positions of each row (at its end).
        pad_tokens: int: padded positions in the batch.
        max_seqlen: int: the longest segment (for the varlen kernels).

    A row of remainder "pad" (mask False) is all padding.
    """

    __slots__ = ("input_ids", "labels", "position_ids", "cu_seqlens", "row_cu_seqlens",
                 "padding", "pad_tokens", "max_seqlen", "length")

    def __init__(self, fields):
        sp = fields.sparse
        ids, lab, pos, cu = (sp[k] for k in TEXT_KEYS)
        rows = fields.rows
        length = int(ids.lengths.max()) if rows else 0
        self.length = length
        if bool((ids.lengths == length).all()):
            self.input_ids = ids.values.view(rows, length)
            self.labels = lab.values.view(rows, length)
            self.position_ids = pos.values.view(rows, length)
        else:  # rows of remainder "pad" carry no tokens: filled here
            full = ids.lengths == length
            self.input_ids = torch.zeros((rows, length), dtype=torch.int64)
            self.labels = torch.full((rows, length), -100, dtype=torch.int64)
            self.position_ids = torch.zeros((rows, length), dtype=torch.int64)
            self.input_ids[full] = ids.values.view(-1, length)
            self.labels[full] = lab.values.view(-1, length)
            self.position_ids[full] = pos.values.view(-1, length)
        self.row_cu_seqlens = cu
        self.padding = fields.labels
        self.pad_tokens = int(fields.labels.sum().item()) + length * int((ids.lengths != length).sum())
        # every row's boundaries after its first 0, shifted to the row's place
        counts = cu.lengths.long()
        row = torch.repeat_interleave(torch.arange(rows, dtype=torch.int64), counts)
        keep = torch.ones(cu.values.numel(), dtype=torch.bool)
        starts = torch.cumsum(counts, 0) - counts
        keep[starts[counts > 0]] = False
        flat = cu.values[keep] + row[keep] * length
        empty = (counts == 0).nonzero().flatten()  # a padding row: one segment
        if empty.numel():
            flat = torch.sort(torch.cat([flat, (empty + 1) * length]))[0]
        self.cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.int64), flat]).to(torch.int32)
        seg = self.cu_seqlens[1:] - self.cu_seqlens[:-1]
        self.max_seqlen = int(seg.max()) if seg.numel() else 0

    def __repr__(self):
        return "Text(rows=%d, length=%d, segments=%d, pad_tokens=%d)" % (
            self.input_ids.shape[0], self.length, self.cu_seqlens.numel() - 1, self.pad_tokens)


def _pin(t):
    """A pinned copy of t, or (without CUDA, where pinning does not exist) a
    plain copy: either way a tensor of its own. None (no labels) stays None."""
    if t is None:
        return None
    if torch.cuda.is_available():
        return t.pin_memory()
    return t.clone()


class _BatchFields:
    """What Batch and TensorBatch share: rows, epoch, labels, dense,
    dense_features, sparse, text."""

    @property
    def text(self):
        """A ``Text`` for a batch of a text session (built on first access
        from the sparse columns), None for any other session."""
        t = getattr(self, "_text", None)
        if t is None and tuple(self.sparse.keys) == TEXT_KEYS:
            t = self._text = Text(self)
        return t

    def pin_memory(self):
        """A TensorBatch whose tensors are pinned (page-locked) copies, for
        ``DataLoader(..., pin_memory=True)`` and fast ``to("cuda",
        non_blocking=True)``. Without CUDA, pinning is unavailable and the
        copies are ordinary ones (torch's DataLoader does not call this then)."""
        dense = _pin(self.dense)
        return TensorBatch(
            self.rows,
            self.epoch,
            _pin(self.labels),
            dense,
            self._split_dense(dense),
            self.sparse._map(_pin),
            _pin(self.mask),
            self.valid_rows,
        )

    def to(self, device, non_blocking=False):
        """A TensorBatch with every tensor on `device`. Tensors are always
        copied when they view the library's memory (also to "cpu")."""
        copy = isinstance(self, Batch)

        def mv(t):
            if t is None:  # the labels of a session without a label
                return None
            return t.to(device, non_blocking=non_blocking, copy=copy)

        dense = self.dense
        # Batch.dense views the library's memory only with one dense feature;
        # otherwise it is already a concatenated copy of its own.
        dense = mv(dense) if len(self.dense_features) == 1 else dense.to(device, non_blocking=non_blocking)
        return TensorBatch(
            self.rows,
            self.epoch,
            mv(self.labels),
            dense,
            self._split_dense(dense),
            self.sparse._map(mv),
            mv(self.mask),
            self.valid_rows,
        )

    def _split_dense(self, dense):
        """dense_features as column slices of a [rows, D] tensor."""
        out = {}
        col = 0
        for name, t in self.dense_features.items():
            dim = t.shape[1]
            out[name] = dense[:, col : col + dim]
            col += dim
        return out

    def __repr__(self):
        return "%s(rows=%d, epoch=%d, dense=%s, sparse=%d keys)" % (
            type(self).__name__,
            self.rows,
            self.epoch,
            list(self.dense.shape),
            len(self.sparse.keys),
        )


class Batch(_BatchFields):
    """One batch from ``Client.next()``, its tensors viewing the library's memory.

    Attributes:
        rows, epoch: ints.
        valid_rows: rows with data; the rest (remainder "pad") is padding,
            which always comes last.
        mask: bool [rows]: True for a row with data, False for padding.
        labels: float32 [rows], or None when the spec has no label
            (``Client.label_name`` is None).
        dense_features: dict name -> float32 [rows, dim], in spec order (views).
        dense: float32 [rows, sum of dims]: the dense features concatenated in
            spec order along dim 1 (a view when the spec has one dense
            feature; [rows, 0] when it has none; otherwise built on first
            access, a copy).
        sparse: a ``Sparse`` (views of ``dpp_batch_kjt``); without sparse
            features it has no keys, empty values and lengths, and offsets
            [0].
        handle: the dpp_batch_t pointer (an int), until released.

    The C batch is released when the Batch and every tensor viewing it are
    gone, or by ``release()``. Writing into the tensors writes into the
    batch's memory: fine (nothing else reads it), but copy what must outlive
    the batch, or use ``pin_memory()``/``to()``.
    """

    def __init__(self, client, ptr):
        lib = client._lib
        h = _Handle(ptr, lib)  # from here on, an exception releases the batch
        self._handle = h
        self.rows = rows = int(lib.dpp_batch_rows(ptr))
        self.epoch = int(lib.dpp_batch_epoch(ptr))
        self.valid_rows = int(lib.dpp_batch_valid_rows(ptr))
        self.mask = _view(h, lib.dpp_batch_mask(ptr), (rows,), "|u1", torch.uint8).view(torch.bool)
        # a mixture's: int32 [rows], each row's source (an index into
        # Client.sources; -1 for padding); None for a session of one table
        src = lib.dpp_batch_source_ids(ptr) if client.sources else None
        self.source_ids = _view(h, src, (rows,), "<i4", torch.int32) if src else None
        p = ctypes.c_void_p()
        self.labels = None
        if client.label_name is not None:
            check(lib.dpp_batch_labels(ptr, ctypes.byref(p)), "dpp_batch_labels")
            self.labels = _view(h, p.value, (rows,), "<f4", torch.float32)
        dim = ctypes.c_uint()
        dense = {}
        for i, name in enumerate(client.dense_names):
            check(lib.dpp_batch_dense_at(ptr, i, ctypes.byref(p), ctypes.byref(dim)), "dpp_batch_dense_at")
            dense[name] = _view(h, p.value, (rows, dim.value), "<f4", torch.float32)
        self.dense_features = dense
        self._dense = None
        if len(dense) == 1:
            self._dense = next(iter(dense.values()))
        elif not dense:
            self._dense = torch.empty((rows, 0), dtype=torch.float32)
        k = _lib.Kjt()
        check(lib.dpp_batch_kjt(ptr, ctypes.byref(k)), "dpp_batch_kjt")
        nl = k.nkeys * k.stride
        self.sparse = Sparse(
            client.sparse_names,
            _view(h, k.values, (k.nvalues,), "<i8", torch.int64),
            _view(h, k.lengths, (nl,), "<i4", torch.int32),
            # without keys the library's one offset is static memory: a
            # tensor of its own, which a trainer may write into
            _view(h, k.offsets, (nl + 1,), "<i4", torch.int32)
            if k.offsets and k.nkeys
            else torch.zeros(nl + 1, dtype=torch.int32),
            _view(h, k.weights, (k.nvalues,), "<f4", torch.float32) if k.weights else None,
            int(k.stride),
            client._sparse_index,
        )

    @property
    def dense(self):
        if self._dense is None:
            self._dense = torch.cat(list(self.dense_features.values()), dim=1)
        return self._dense

    @property
    def handle(self):
        """The dpp_batch_t pointer (int), or None once released."""
        return self._handle.ptr

    @property
    def released(self):
        return self._handle.released

    def release(self):
        """Releases the C batch now instead of when the last view goes.
        Afterwards every tensor of this batch (and any view of them) points
        at freed memory: do not touch them. Idempotent."""
        self._handle.release()


class TensorBatch(_BatchFields):
    """A batch whose tensors are its own (``Batch.pin_memory()``/``to()``):
    same fields as Batch; ``dense_features`` are column slices of ``dense``."""

    def __init__(self, rows, epoch, labels, dense, dense_features, sparse, mask=None, valid_rows=None):
        self.rows = rows
        self.valid_rows = rows if valid_rows is None else valid_rows
        self.mask = torch.ones(rows, dtype=torch.bool) if mask is None else mask
        self.epoch = epoch
        self.labels = labels
        self.dense = dense
        self.dense_features = dense_features
        self.sparse = sparse

    def release(self):
        """Nothing to release (kept for symmetry with Batch)."""
