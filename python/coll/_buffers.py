# SPDX-License-Identifier: Apache-2.0
"""_buffers: NumPy arrays and torch tensors as (pointer, count, dtype),
without copies, checked before anything reaches libcoll.

Only C-contiguous memory is accepted: libcoll reads `count` elements from
the pointer, so a strided view would be read wrongly. Neither NumPy nor
torch is imported here; an object can only be one of them if its module is
loaded already.
"""
import sys

from . import _types


class View:
    """One buffer argument: the object (kept alive by the caller of this
    module as long as libcoll may use it), its data pointer, element count,
    coll dtype and device ("cpu", or "cuda:N")."""

    __slots__ = ("obj", "ptr", "count", "dtype", "device", "nbytes")

    def __init__(self, obj, ptr, count, dtype, device, nbytes):
        self.obj = obj
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.device = device
        self.nbytes = nbytes

    @property
    def is_cuda(self):
        return self.device != "cpu"


def _numpy_view(a, what, writable):
    if not a.flags.c_contiguous:
        raise ValueError("coll: %s is not C-contiguous (pass a contiguous copy)" % what)
    if writable and not a.flags.writeable:
        raise ValueError("coll: %s is read-only but the call writes into it" % what)
    dt = _types.from_numpy(a.dtype)
    if dt is None:
        raise TypeError(
            "coll: %s has dtype %s, which libcoll has no type for (float16, "
            "float32, float64, int8, uint8, int32, int64; bfloat16 through torch)"
            % (what, a.dtype.str if a.dtype.byteorder == ">" else a.dtype.name)
        )
    return View(a, a.__array_interface__["data"][0], a.size, dt, "cpu", a.nbytes)


def _torch_view(torch, t, what, writable):
    if t.layout != torch.strided:
        raise TypeError("coll: %s has layout %s; only dense tensors are supported" % (what, t.layout))
    if not t.is_contiguous():
        raise ValueError("coll: %s is not contiguous (call .contiguous() first)" % what)
    dt = _types.from_torch(t.dtype)
    if dt is None:
        raise TypeError(
            "coll: %s has dtype %s, which libcoll has no type for (float16, "
            "bfloat16, float32, float64, int8, uint8, int32, int64)" % (what, t.dtype)
        )
    dev = t.device
    if dev.type == "cpu":
        device = "cpu"
    elif dev.type == "cuda":
        device = "cuda:%d" % dev.index
    else:
        raise ValueError(
            "coll: %s is on device %s; only CPU and CUDA tensors are supported" % (what, dev)
        )
    return View(t, t.data_ptr(), t.numel(), dt, device, t.numel() * t.element_size())


def view(obj, what, writable):
    """The View of a NumPy array or torch tensor; `what` names the argument
    in error texts; `writable` when libcoll writes into it."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_view(torch, obj, what, writable)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return _numpy_view(obj, what, writable)
    raise TypeError(
        "coll: %s must be a NumPy array or a torch tensor, not %s" % (what, type(obj).__name__)
    )


def same_kind(views, what):
    """All views of one call share dtype and device."""
    first = views[0]
    for v in views[1:]:
        if v.dtype != first.dtype:
            raise TypeError(
                "coll: %s: dtypes differ (%s and %s)" % (what, first.dtype.name, v.dtype.name)
            )
    same_device(views, what)


def same_device(views, what):
    """All views of one call are on one device."""
    first = views[0]
    for v in views[1:]:
        if v.device != first.device:
            raise ValueError(
                "coll: %s: buffers on different devices (%s and %s)"
                % (what, first.device, v.device)
            )


def stream_of(v):
    """The stream argument for a buffer: torch's current stream on the
    buffer's CUDA device, NULL for host memory."""
    if not v.is_cuda:
        return None
    import torch

    return torch.cuda.current_stream(v.obj.device).cuda_stream or None
