# SPDX-License-Identifier: Apache-2.0
"""refs: test data and a serial NumPy reference for libcoll's reductions,
following the README's numerics contract:

- floats: f16/bf16 accumulate in f32 within a step and travel as 2 bytes;
  AVG is the sum scaled once by 1/n (f16/bf16/f32 by the float 1/n, f64 by
  the double); MAX/MIN exact.
- I32/I64: SUM and PROD wrap as two's complement; AVG is the wrapped sum
  divided by n, truncated toward zero.
- I8/U8: SUM is the exact sum clamped once; AVG the exact sum / n rounded
  to nearest, ties away from zero; PROD wraps.

The reference is bit-exact where the order of the reduction cannot change
the result: 2 ranks (a + b == b + a, and each step rounds once), or data
whose partial results are all representable (small integers, powers of
two), for any rank count. `carrier` arrays hold the values: the dtype
itself, or float32 for bf16 (NumPy has none).
"""
import numpy as np

import coll

D = coll.DType
FLOATS = (D.F16, D.BF16, D.F32, D.F64)
INTS = (D.I8, D.U8, D.I32, D.I64)
ALL = FLOATS + INTS
NUMPY_DTYPES = tuple(d for d in ALL if d != D.BF16)

_CARRIER = {
    D.F16: np.float16,
    D.BF16: np.float32,
    D.F32: np.float32,
    D.F64: np.float64,
    D.I8: np.int8,
    D.U8: np.uint8,
    D.I32: np.int32,
    D.I64: np.int64,
}


def carrier(dt):
    return np.dtype(_CARRIER[dt])


def round_to(dt, x):
    """x (float64 or float32 values) rounded once to dt, as a carrier array."""
    x = np.asarray(x)
    if dt == D.BF16:
        import torch

        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).bfloat16().float().numpy()
    return x.astype(carrier(dt))


def make(kind, dt, values):
    """A fresh NumPy array or torch tensor of dtype dt holding `values`."""
    values = np.ascontiguousarray(values, dtype=carrier(dt))
    if kind == "numpy":
        assert dt != D.BF16
        return values.copy()
    import torch

    t = torch.from_numpy(values.copy())
    return t.bfloat16() if dt == D.BF16 else t


def back(obj):
    """A NumPy carrier copy of an array or tensor."""
    if isinstance(obj, np.ndarray):
        return obj.copy()
    import torch

    if obj.dtype == torch.bfloat16:
        return obj.float().numpy().copy()
    return obj.numpy().copy()


def data(dt, op, rank, count, seed=0):
    """Rank `rank`'s input: exact-friendly values for floats (integers in
    [-8, 8], powers of two for PROD), the whole range for integers (so
    sums wrap or clamp)."""
    rng = np.random.default_rng(1000 * seed + 17 * rank + int(dt) + 100 * int(op))
    if dt in FLOATS:
        if op == coll.Op.PROD:
            v = rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], size=count)
        else:
            v = rng.integers(-8, 9, size=count).astype(np.float64)
        return round_to(dt, v)
    info = np.iinfo(carrier(dt))
    if op == coll.Op.PROD and dt in (D.I32, D.I64):
        return rng.integers(-5, 6, size=count).astype(carrier(dt))
    return rng.integers(info.min, info.max, size=count, endpoint=True, dtype=carrier(dt))


def random_floats(dt, rank, count, seed=0):
    """Non-integer values of dt, for the 2-rank bit-exact checks."""
    rng = np.random.default_rng(5000 + 31 * rank + int(dt) + seed)
    return round_to(dt, rng.standard_normal(count) * 3.0)


def reduce(dt, op, inputs):
    """The serial reference of reducing the carrier arrays `inputs` (one per
    rank, in rank order) with op, as a carrier array."""
    n = len(inputs)
    op = coll.Op(op)
    if op in (coll.Op.MAX, coll.Op.MIN):
        f = np.maximum if op == coll.Op.MAX else np.minimum
        out = inputs[0].copy()
        for x in inputs[1:]:
            out = f(out, x)
        return out
    if dt in FLOATS:
        if op == coll.Op.PROD:
            # A product of two f32 is exact in f64, and a product of two
            # f16/bf16 is exact in f32: one rounding at 2 ranks; powers of
            # two are exact at any count.
            acc = inputs[0].astype(np.float64)
            for x in inputs[1:]:
                acc = acc * x.astype(np.float64)
            return round_to(dt, acc)
        if dt == D.F64:
            acc = inputs[0].astype(np.float64).copy()
            for x in inputs[1:]:
                acc = acc + x
            s = acc
        else:
            s = round_to(dt, sum(x.astype(np.float64) for x in inputs))
        if op == coll.Op.SUM:
            return s
        if dt == D.F64:
            return s * (1.0 / n)
        return round_to(dt, s.astype(np.float32) * np.float32(1.0 / n))
    # Every integer case fits in int64 on the way: 8/32-bit sums of up to 4
    # ranks exactly, 64-bit sums wrapping as libcoll's do, products of the
    # small PROD data exactly.
    wide = [x.astype(np.int64) for x in inputs]
    acc = wide[0].copy()
    for x in wide[1:]:
        acc = acc * x if op == coll.Op.PROD else acc + x
    if op == coll.Op.PROD:
        return acc.astype(carrier(dt))
    if dt in (D.I32, D.I64):
        wrapped = acc.astype(carrier(dt))
        if op == coll.Op.SUM:
            return wrapped
        return _trunc_div(wrapped.astype(np.int64), n).astype(carrier(dt))
    info = np.iinfo(carrier(dt))
    if op == coll.Op.SUM:
        return np.clip(acc, info.min, info.max).astype(carrier(dt))
    return _round_away(acc, n).astype(carrier(dt))


def _trunc_div(v, n):
    """v / n truncated toward zero, elementwise, without overflow."""
    q = v // n
    return q + ((v < 0) & (v % n != 0))


def _round_away(v, n):
    """v / n rounded to nearest, ties away from zero."""
    q = (2 * np.abs(v) + n) // (2 * n)
    return np.where(v < 0, -q, q)
