# SPDX-License-Identifier: Apache-2.0
"""dpp.submit, dpp.status, dpp.cancel: sessions driven from Python, as dppctl
drives them (libdppclient's dpp_session_* calls, include/dpp/client.h)."""
import ctypes
import json
import os

from . import _lib
from ._errors import DppError, DppTimeoutError

DEFAULT_MASTER = "127.0.0.1:7070"


def _master(master):
    """The master's address: the argument, else $DPP_MASTER, else dppctl's default."""
    return master or os.environ.get("DPP_MASTER") or DEFAULT_MASTER


def _spec_text(spec):
    """A spec's JSON text from a dict (or list), a path, or JSON text."""
    if isinstance(spec, dict):
        return json.dumps(spec)
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8")
    if not isinstance(spec, str):
        raise TypeError(
            "spec must be a dict, a path to a spec file or its JSON text, not %s"
            % type(spec).__name__
        )
    if spec.lstrip().startswith("{"):
        return spec
    try:
        with open(spec, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise FileNotFoundError(
            "spec %r: %s (expected a dict, a spec file's path, or its JSON text)"
            % (spec, e.strerror or e)
        ) from None


def _fail(rc, call, session=None):
    lib = _lib.load()
    detail = lib.dpp_session_error().decode("utf-8", "replace")
    cls = DppTimeoutError if rc == _lib.ERRORS["DPP_ETIMEDOUT"] else DppError
    return cls(rc, call, detail, session=session)


def _args(master, token, timeout_s):
    ms = 0 if timeout_s is None else max(1, int(timeout_s * 1000))
    tok = token.encode() if isinstance(token, str) else token
    return _master(master).encode(), tok, ms


class Session:
    """A session on a master: what ``dpp.submit()`` returns.

    ``session.id`` is the id dppctl prints (``str(session)`` too);
    ``session.master`` the master's address. ``dpp.TorchDataset(session)``
    and ``dpp.Client(session)`` read it. ``status()`` is the dict ``dppctl
    status ID -o json`` prints (``state``, ``epoch``, ``rows_produced``,
    ``error``, ``ranks``, ...); ``cancel()`` stops the session."""

    def __init__(self, id, master=None, token=None, timeout_s=10.0):
        self.id = id
        self.master = _master(master)
        self.token = token
        self.timeout_s = timeout_s

    def status(self):
        return status(self.id, master=self.master, token=self.token, timeout_s=self.timeout_s)

    @property
    def state(self):
        """status()["state"]: "indexing", "running", "done", "failed" or "cancelled"."""
        return self.status()["state"]

    def cancel(self):
        """Cancels the session; returns its state before ("running", ...)."""
        return cancel(self.id, master=self.master, token=self.token, timeout_s=self.timeout_s)

    def __str__(self):
        return self.id

    def __repr__(self):
        return "dpp.Session(%r, master=%r)" % (self.id, self.master)

    def __eq__(self, other):
        if isinstance(other, Session):
            return (self.id, self.master) == (other.id, other.master)
        return NotImplemented

    def __hash__(self):
        return hash((self.id, self.master))


def submit(spec, master=None, token=None, timeout_s=10.0):
    """Submits a session spec and returns its ``Session``.

    ``spec`` is a dict (the spec's JSON object), the path of a spec file, or
    its JSON text. ``master`` is "HOST:PORT" (default: $DPP_MASTER, else
    127.0.0.1:7070); ``token`` the cluster token's text (default: the file
    $DPP_TOKEN_FILE names, else none). A spec the master refuses raises
    DppError with code DPP_ESPEC and every problem in ``detail``, one per
    line, each with its JSON path (as ``dppctl submit`` prints them)."""
    text = _spec_text(spec).encode("utf-8")
    m, tok, ms = _args(master, token, timeout_s)
    out = ctypes.create_string_buffer(64)
    rc = _lib.load().dpp_session_submit(m, tok, ms, text, out, len(out))
    if rc < 0:
        raise _fail(rc, "dpp_session_submit")
    return Session(out.value.decode(), master=m.decode(), token=token, timeout_s=timeout_s)


def unpack(master, session, token=None):
    """(master, session id, token) of Client/TorchDataset arguments that may
    hold a Session: ``(Session,)``, ``(master, Session)`` or ``(master, id)``."""
    if isinstance(master, Session):
        if session is not None:
            raise TypeError("give a dpp.Session alone, or a master and a session id, not both")
        master, session = master.master, master
    if isinstance(session, Session):
        token = token if token is not None else session.token
        session = session.id
    return master, session, token


def _id(session):
    return session.id if isinstance(session, Session) else session


def status(session=None, master=None, token=None, timeout_s=10.0):
    """The status of a session (a Session or its id) as a dict, or without
    one the master's listing as a list of dicts (newest first, no ranks):
    what ``dppctl status -o json`` and ``dppctl list -o json`` print."""
    if isinstance(session, Session) and master is None:
        master = session.master
    sid = _id(session)
    m, tok, ms = _args(master, token, timeout_s)
    out = ctypes.c_void_p()
    lib = _lib.load()
    rc = lib.dpp_session_status(m, tok, ms, sid.encode() if sid else None, ctypes.byref(out))
    if rc < 0:
        raise _fail(rc, "dpp_session_status", sid)
    try:
        return json.loads(ctypes.string_at(out.value).decode("utf-8"))
    finally:
        lib.dpp_free(out)


def cancel(session, master=None, token=None, timeout_s=10.0):
    """Cancels a session (a Session or its id); returns its state before
    the cancel. Its clients then fail with "cancelled"."""
    if isinstance(session, Session) and master is None:
        master = session.master
    sid = _id(session)
    if not sid:
        raise ValueError("cancel: which session? (a dpp.Session or its id)")
    m, tok, ms = _args(master, token, timeout_s)
    out = ctypes.create_string_buffer(32)
    rc = _lib.load().dpp_session_cancel(m, tok, ms, sid.encode(), out, len(out))
    if rc < 0:
        raise _fail(rc, "dpp_session_cancel", sid)
    return out.value.decode()
