# SPDX-License-Identifier: Apache-2.0
"""coll: Python binding of libcoll (ctypes), for NumPy arrays and torch
tensors, without copies.

    import coll
    comms = coll.inproc_comms(4)          # 4 ranks as threads of this process
    comm = coll.init_env()                # or one rank per process (coll-run,
                                          # torchrun, mpirun)
    comm.allreduce(x)                     # in place; allreduce(x, y) out of place

The library is COLL_LIBRARY if set, else found beside the package, in the
source tree's build/, or installed (libcoll.so.0). See docs/python.md. torch.distributed support lives in coll.distributed (imported on
demand, not here).
"""
from ._lib import version as _libversion
from ._lib import path as library_path
from ._lib import CommConfig
from ._types import DType, Op
from ._errors import (
    CollError,
    InvalidArgError,
    NoMemoryError,
    UnsupportedError,
    NotAvailableError,
    AbortedError,
    TimeoutError,
    PeerLostError,
    ProtocolError,
    LengthMismatchError,
    BackendError,
    SystemCallError,
    InternalError,
)
from ._handles import AbortHandle, Request, abort_handle_create
from ._comm import Comm
from ._create import inproc_comms, init_env

__version__ = "0.1.0"
#: The loaded libcoll's version as (major, minor, patch).
library_version = (_libversion // 10000, _libversion // 100 % 100, _libversion % 100)

F16, BF16, F32, F64 = DType.F16, DType.BF16, DType.F32, DType.F64
I8, U8, I32, I64 = DType.I8, DType.U8, DType.I32, DType.I64
SUM, PROD, MAX, MIN, AVG = Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.AVG

__all__ = [
    "AbortHandle",
    "AbortedError",
    "AVG",
    "BF16",
    "BackendError",
    "CollError",
    "Comm",
    "CommConfig",
    "DType",
    "F16",
    "F32",
    "F64",
    "I32",
    "I64",
    "I8",
    "InternalError",
    "InvalidArgError",
    "LengthMismatchError",
    "MAX",
    "MIN",
    "NoMemoryError",
    "NotAvailableError",
    "Op",
    "PROD",
    "PeerLostError",
    "ProtocolError",
    "Request",
    "SUM",
    "SystemCallError",
    "TimeoutError",
    "U8",
    "UnsupportedError",
    "abort_handle_create",
    "init_env",
    "inproc_comms",
    "library_path",
    "library_version",
]
