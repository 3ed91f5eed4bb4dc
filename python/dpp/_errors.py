# SPDX-License-Identifier: Apache-2.0
"""Exceptions of the dpp package."""
import errno as _errno

from . import _lib


class DppError(Exception):
    """A libdppclient call failed.

    Attributes:
        code: the negative error number (a ``DPP_E*`` value of
            include/dpp/error.h, or ``-errno`` such as ``-errno.ECONNREFUSED``).
        name: its symbolic name (``"DPP_ENOSESSION"``, ``"ECONNREFUSED"``).
        strerror: ``dpp_strerror(code)``.
        detail: ``dpp_client_error()`` when the client could say more (for
            DPP_EFAILED: the session's failure as the master reports it);
            from ``Client()``, ``dpp_client_open_error()`` (for DPP_ETOKEN:
            the token field that does not fit, what the token and the plan
            say); else "".
        call: the C function that failed.
        session, rank: the session and rank the client reads (None: not
            known), named in the message too.
    """

    def __init__(self, code, call="", detail="", session=None, rank=None):
        self.code = int(code)
        self.call = call
        self.detail = detail or ""
        self.session = session
        self.rank = rank
        try:
            lib = _lib.load()
            self.strerror = lib.dpp_strerror(self.code).decode("utf-8", "replace")
            self.name = lib.dpp_err_name(self.code).decode("utf-8", "replace")
        except Exception:  # library gone (interpreter shutdown): fall back
            self.name = _NAMES.get(self.code) or _errno.errorcode.get(-self.code, str(self.code))
            self.strerror = self.name
        msg = "%s%s (%s, %d)" % (call + ": " if call else "", self.strerror, self.name, self.code)
        if session is not None:
            msg += ": session %s rank %s" % (session, rank)
        if self.detail:
            msg += ": " + self.detail
        super().__init__(msg)


_NAMES = {v: k for k, v in _lib.ERRORS.items()}


class DppTimeoutError(DppError, TimeoutError):
    """``Client.next(timeout_s=...)`` ran out of time (code ``DPP_ETIMEDOUT``).
    The client is still usable: call ``next()`` again."""


class EndOfData(Exception):
    """Base of EpochEnd and SessionEnd (not errors: the ends of the stream)."""


class EpochEnd(EndOfData):
    """``Client.next()``: this rank has every batch of epoch ``self.epoch``."""

    def __init__(self, epoch):
        self.epoch = epoch
        super().__init__("end of epoch %d" % epoch)


class SessionEnd(EndOfData):
    """``Client.next()``: every epoch of the session is done (raised again on
    every later call)."""

    def __init__(self):
        super().__init__("end of session")


def check(rc, call, client=None):
    """Raises the DppError for a negative rc, else returns rc."""
    if rc >= 0:
        return rc
    detail = ""
    where = {}
    if client is not None:
        try:
            detail = client._error_text()
        except Exception:
            detail = ""
        where = {"session": getattr(client, "session", None), "rank": getattr(client, "rank", None)}
    if rc == _lib.ERRORS["DPP_ETIMEDOUT"]:
        raise DppTimeoutError(rc, call, detail, **where)
    raise DppError(rc, call, detail, **where)
