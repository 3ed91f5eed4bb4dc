# SPDX-License-Identifier: Apache-2.0
"""ctypes declarations of libdppclient (include/dpp/client.h, include/dpp/error.h).

The library is found, in this order:

1. ``DPP_LIB``: the path of ``libdppclient.so`` (for example
   ``DPP_LIB=build/libdppclient.so``);
2. the copy bundled in the package (``dpp/libdppclient.so.0``, put there
   by ``pip install ./python``, see python/setup.py);
3. the build tree next to this package: ``<source>/build/libdppclient.so``
   when the package is used from the source tree (``PYTHONPATH=python``);
4. ``ctypes.util.find_library("dppclient")``: an installed library that the
   dynamic linker knows (ldconfig, ``LD_LIBRARY_PATH``);
5. the lib folders of the usual install prefixes (``sys.prefix``,
   /usr/local): ``make install`` puts it in /usr/local/lib, which the
   linker's cache may not list until ``ldconfig`` runs.

Nothing is compiled: the structures below mirror the C header and must be
kept in step with it.
"""
import ctypes
import ctypes.util
import os
import sys
import threading

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_size_t = ctypes.c_size_t
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
POINTER = ctypes.POINTER

# Positive results of dpp_client_next().
DPP_BATCH = 0
DPP_EPOCH_END = 1
DPP_SESSION_END = 2

# include/dpp/error.h (numbers are part of the wire protocol, never renumbered).
ERRORS = {
    "DPP_ESPEC": -1001,
    "DPP_EFRAME": -1002,
    "DPP_EFRAMESIZE": -1003,
    "DPP_EMSGTYPE": -1004,
    "DPP_EMSG": -1005,
    "DPP_EVERSION": -1006,
    "DPP_ENOSESSION": -1007,
    "DPP_ECORRUPT": -1008,
    "DPP_ETRUNCATED": -1009,
    "DPP_EEXAMPLE": -1010,
    "DPP_EMISSING": -1011,
    "DPP_ETYPE": -1012,
    "DPP_ETOOBIG": -1013,
    "DPP_EPATH": -1014,
    "DPP_ETIMEDOUT": -1015,
    "DPP_ECLOSED": -1016,
    "DPP_EBLOCK": -1017,
    "DPP_ENOFEATURE": -1018,
    "DPP_EFAILED": -1019,
    "DPP_ERANK": -1020,
    "DPP_EINVAL": -1021,
    "DPP_ETOKEN": -1022,
    "DPP_EAUTH": -1023,
    "DPP_EINDEX": -1024,
    "DPP_EHELD": -1025,
    "DPP_ERESOLVE": -1026,
    "DPP_ESTORAGE": -1027,
    "DPP_ECHANGED": -1028,
}


class ClientOptions(ctypes.Structure):
    """dpp_client_options_t."""

    _fields_ = [
        ("master", c_char_p),
        ("session", c_char_p),
        ("rank", c_uint),
        ("world_size", c_uint),
        ("prefetch", c_uint),
        ("memory_budget", c_size_t),
        ("connect_timeout_ms", c_int),
        ("token", c_char_p),
        ("prefetch_splits", c_uint),
        ("resume_token", c_void_p),
        ("resume_token_len", c_size_t),
        ("max_block_mb", c_uint),
        ("elastic_tokens", c_void_p),
        ("elastic_tokens_len", c_size_t),
    ]


class ClientStats(ctypes.Structure):
    """dpp_client_stats_t."""

    _fields_ = [
        ("batches", c_uint64),
        ("rows", c_uint64),
        ("wait_ns", c_uint64),
        ("wait_hist", c_uint64 * 16),
        ("bytes_wire", c_uint64),
        ("bytes_raw", c_uint64),
        ("blocks", c_uint64),
        ("blocks_duplicate", c_uint64),
        ("reconnects", c_uint64),
        ("batches_zero_copy", c_uint64),
        ("rows_padded", c_uint64),
    ]


class Kjt(ctypes.Structure):
    """dpp_kjt_t (pointers as integers: they become NumPy/torch views)."""

    _fields_ = [
        ("nkeys", c_uint),
        ("stride", c_size_t),
        ("values", c_void_p),
        ("nvalues", c_size_t),
        ("lengths", c_void_p),
        ("offsets", c_void_p),
        ("weights", c_void_p),
    ]


# name: (restype, argtypes). Pointers the accessors return are read as
# c_void_p (a plain int or None), so they can be wrapped without a copy.
_P = c_void_p  # dpp_client_t * / dpp_batch_t *
_PROTOS = {
    "dpp_strerror": (c_char_p, [c_int]),
    "dpp_err_name": (c_char_p, [c_int]),
    "dpp_client_options_init": (None, [POINTER(ClientOptions)]),
    "dpp_client_open_opts": (c_int, [POINTER(c_void_p), POINTER(ClientOptions)]),
    "dpp_client_open": (c_int, [POINTER(c_void_p), c_char_p, c_char_p, c_uint, c_int]),
    "dpp_client_open_error": (c_char_p, []),
    "dpp_client_next": (c_int, [_P, POINTER(c_void_p), c_int]),
    "dpp_client_error": (c_char_p, [_P]),
    "dpp_client_epoch": (c_uint, [_P]),
    "dpp_client_epoch_batches": (c_int64, [_P]),
    "dpp_client_batch_size": (c_uint, [_P]),
    "dpp_client_num_epochs": (c_uint, [_P]),
    "dpp_client_close": (None, [_P]),
    "dpp_client_num_dense": (c_uint, [_P]),
    "dpp_client_num_sparse": (c_uint, [_P]),
    "dpp_client_dense_name": (c_char_p, [_P, c_uint]),
    "dpp_client_sparse_name": (c_char_p, [_P, c_uint]),
    "dpp_client_dense_dim": (c_uint, [_P, c_uint]),
    "dpp_client_label_name": (c_char_p, [_P]),
    "dpp_client_sparse_weighted": (c_int, [_P, c_uint]),
    "dpp_client_get_stats": (None, [_P, POINTER(ClientStats)]),
    "dpp_client_checkpoint": (c_int, [_P, c_void_p, c_size_t]),
    "dpp_batch_rows": (c_size_t, [_P]),
    "dpp_batch_valid_rows": (c_size_t, [_P]),
    "dpp_batch_mask": (c_void_p, [_P]),
    "dpp_batch_source_ids": (c_void_p, [_P]),
    "dpp_client_num_sources": (c_uint, [_P]),
    "dpp_client_source_name": (c_char_p, [_P, c_uint]),
    "dpp_batch_epoch": (c_uint, [_P]),
    "dpp_batch_labels": (c_int, [_P, POINTER(c_void_p)]),
    "dpp_batch_dense": (c_int, [_P, c_char_p, POINTER(c_void_p), POINTER(c_uint)]),
    "dpp_batch_dense_at": (c_int, [_P, c_uint, POINTER(c_void_p), POINTER(c_uint)]),
    "dpp_batch_sparse": (
        c_int,
        [_P, c_char_p, POINTER(c_void_p), POINTER(c_void_p), POINTER(c_size_t)],
    ),
    "dpp_batch_sparse_at": (
        c_int,
        [_P, c_uint, POINTER(c_void_p), POINTER(c_void_p), POINTER(c_size_t)],
    ),
    "dpp_batch_sparse_weights": (c_int, [_P, c_char_p, POINTER(c_void_p)]),
    "dpp_batch_kjt": (c_int, [_P, POINTER(Kjt)]),
    "dpp_batch_release": (None, [_P]),
    "dpp_session_submit": (c_int, [c_char_p, c_char_p, c_int, c_char_p, c_char_p, c_size_t]),
    # the JSON text comes back as a c_void_p, freed with dpp_free after reading
    "dpp_session_status": (c_int, [c_char_p, c_char_p, c_int, c_char_p, POINTER(c_void_p)]),
    "dpp_session_cancel": (c_int, [c_char_p, c_char_p, c_int, c_char_p, c_char_p, c_size_t]),
    "dpp_session_error": (c_char_p, []),
    "dpp_free": (None, [c_void_p]),
}


class Lib:
    """The loaded library: ``lib.dpp_client_next(...)`` etc., declared lazily so
    that a symbol the library lacks fails only when it is used, naming it."""

    def __init__(self, path):
        self.path = path
        self.cdll = ctypes.CDLL(path)
        self._lock = threading.Lock()

    def __getattr__(self, name):
        proto = _PROTOS.get(name)
        if proto is None:
            raise AttributeError(name)
        try:
            fn = getattr(self.cdll, name)
        except AttributeError:
            raise AttributeError(
                "%s does not export %s: the library is older than the dpp Python "
                "package (rebuild it, or point DPP_LIB at a current libdppclient.so)"
                % (self.path, name)
            ) from None
        fn.restype, fn.argtypes = proto
        with self._lock:
            self.__dict__[name] = fn
        return fn


def _candidates():
    env = os.environ.get("DPP_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.dirname(os.path.dirname(here))  # python/dpp -> python -> source tree
    found = []
    bundled = os.path.join(here, "libdppclient.so.0")
    if os.path.exists(bundled):
        found.append(bundled)
    for name in ("libdppclient.so", "libdppclient.so.0"):
        p = os.path.join(source, "build", name)
        if os.path.exists(p):
            found.append(p)
            break
    sys_name = ctypes.util.find_library("dppclient")
    if sys_name:
        found.append(sys_name)
    for prefix in dict.fromkeys((sys.prefix, "/usr/local")):
        for lib in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            p = os.path.join(prefix, lib, "libdppclient.so.0")
            if os.path.exists(p) and p not in found:
                found.append(p)
    return found, False


_lib = None
_lib_lock = threading.Lock()


def load():
    """Returns the process's Lib, loading libdppclient on first use."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        paths, from_env = _candidates()
        if not paths:
            raise OSError(
                "libdppclient not found: set DPP_LIB to the path of libdppclient.so "
                "(e.g. DPP_LIB=build/libdppclient.so), build it in <source>/build, or "
                "install it (make install) where the dynamic linker finds it"
            )
        errors = []
        for p in paths:
            try:
                _lib = Lib(p)
                return _lib
            except OSError as e:
                errors.append("%s: %s" % (p, e))
                if from_env:
                    break
        raise OSError("cannot load libdppclient: " + "; ".join(errors))


def library_path():
    """The path (or soname) of the libdppclient this process uses."""
    return load().path
