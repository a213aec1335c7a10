# SPDX-License-Identifier: Apache-2.0
"""_errors: one exception class per coll_status_t failure.

Each also subclasses the builtin a caller would naturally catch (a refused
argument is a ValueError, a lost peer a ConnectionError, a timeout a
TimeoutError), so generic handlers keep working.
"""
import builtins

from . import _lib


class CollError(Exception):
    """A libcoll call returned a status other than COLL_OK.

    .status is the numeric coll_status_t, .status_name its name without
    prefix ("ERR_PEER_LOST"), .detail the thread's coll_last_error() text.
    """

    status = None

    def __init__(self, status, detail, where=""):
        self.status = int(status)
        self.status_name = _lib.lib.coll_status_name(self.status).decode()
        self.detail = detail
        text = _lib.lib.coll_strerror(self.status).decode()
        msg = "COLL_%s (%s)" % (self.status_name, text)
        if where:
            msg = "%s: %s" % (where, msg)
        if detail:
            msg = "%s: %s" % (msg, detail)
        super().__init__(msg)

    def __str__(self):
        return self.args[0]


class InvalidArgError(CollError, ValueError):
    status = 1


class NoMemoryError(CollError, MemoryError):
    status = 2


class UnsupportedError(CollError, NotImplementedError):
    status = 3


class NotAvailableError(CollError, RuntimeError):
    status = 4


class AbortedError(CollError, RuntimeError):
    status = 5


class TimeoutError(CollError, builtins.TimeoutError):
    status = 6


class PeerLostError(CollError, ConnectionError):
    status = 7


class ProtocolError(CollError, RuntimeError):
    status = 8


class LengthMismatchError(CollError, ValueError):
    status = 9


class BackendError(CollError, RuntimeError):
    status = 10


class SystemCallError(CollError, OSError):
    """COLL_ERR_SYSTEM (not named SystemError: that builtin means an
    interpreter fault)."""

    status = 11


class InternalError(CollError, RuntimeError):
    status = 12


# Every class above, by its status: derived, so a class added is found.
BY_STATUS = {cls.status: cls for cls in CollError.__subclasses__()}


def error(status, where="", detail=None):
    """The exception for `status`; detail defaults to this thread's
    coll_last_error(), so call it right after the failed call."""
    if detail is None:
        detail = _lib.last_error()
    return BY_STATUS.get(status, CollError)(status, detail, where)


def check(status, where=""):
    """Raise the matching CollError unless status is COLL_OK."""
    if status != 0:
        raise error(status, where)
