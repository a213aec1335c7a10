# SPDX-License-Identifier: Apache-2.0
"""_types: coll_dtype_t and coll_op_t, and their NumPy/torch counterparts."""
import enum
import sys


class DType(enum.IntEnum):
    """coll_dtype_t (same numbers)."""

    F16 = 0
    BF16 = 1
    F32 = 2
    F64 = 3
    I8 = 4
    U8 = 5
    I32 = 6
    I64 = 7


class Op(enum.IntEnum):
    """coll_op_t (same numbers). AVG is the sum scaled once by 1/world."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


# NumPy's dtype names; NumPy has no bfloat16 (torch.bfloat16 maps to BF16).
_NUMPY_NAMES = {
    "float16": DType.F16,
    "float32": DType.F32,
    "float64": DType.F64,
    "int8": DType.I8,
    "uint8": DType.U8,
    "int32": DType.I32,
    "int64": DType.I64,
}

_TORCH_NAMES = {
    "float16": DType.F16,
    "bfloat16": DType.BF16,
    "float32": DType.F32,
    "float64": DType.F64,
    "int8": DType.I8,
    "uint8": DType.U8,
    "int32": DType.I32,
    "int64": DType.I64,
}


def op_of(op):
    """An Op from an Op, its number or its name ("sum", "AVG")."""
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            pass
        raise ValueError(
            "coll: unknown reduction op %r (one of %s)"
            % (op, ", ".join(o.name.lower() for o in Op))
        )
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return Op(op)
        except ValueError:
            raise ValueError("coll: unknown reduction op %d" % op) from None
    raise TypeError("coll: op must be a coll.Op or its name, not %s" % type(op).__name__)


def dtype_of(dt):
    """A DType from a DType, its name ("f32"), a NumPy or a torch dtype."""
    if isinstance(dt, DType):
        return dt
    if isinstance(dt, str):
        try:
            return DType[dt.upper()]
        except KeyError:
            raise ValueError("coll: unknown dtype %r" % dt) from None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dt, torch.dtype):
        name = str(dt).replace("torch.", "")
        if name in _TORCH_NAMES:
            return _TORCH_NAMES[name]
        raise TypeError("coll: torch dtype %s has no libcoll dtype" % dt)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            name = np.dtype(dt).name
        except TypeError:
            name = None
        if name in _NUMPY_NAMES:
            return _NUMPY_NAMES[name]
        if name is not None:
            raise TypeError("coll: NumPy dtype %s has no libcoll dtype" % name)
    raise TypeError("coll: cannot make a coll.DType of %r" % (dt,))


def numpy_dtype(dt):
    """The NumPy dtype of a DType (None for BF16)."""
    try:
        import numpy as np
    except ImportError as e:
        from ._torch_ext import missing_module

        raise missing_module("numpy", "python3-numpy", e) from e

    for name, d in _NUMPY_NAMES.items():
        if d == dt:
            return np.dtype(name)
    return None


def torch_dtype(dt):
    """The torch dtype of a DType."""
    import torch

    for name, d in _TORCH_NAMES.items():
        if d == dt:
            return getattr(torch, name)
    raise ValueError("coll: no torch dtype for %r" % (dt,))


_FROM_NUMPY = {}


def from_numpy(np_dtype):
    """The DType of a NumPy array's dtype, or None (cached: it is on every
    call's path)."""
    try:
        return _FROM_NUMPY[np_dtype]
    except KeyError:
        pass
    native = "<" if sys.byteorder == "little" else ">"
    dt = None
    if np_dtype.byteorder in ("=", "|", native):
        dt = _NUMPY_NAMES.get(np_dtype.name)
    _FROM_NUMPY[np_dtype] = dt
    return dt


def from_torch(torch_dt):
    """The DType of a torch dtype, or None."""
    return _TORCH_NAMES.get(str(torch_dt).replace("torch.", ""))
