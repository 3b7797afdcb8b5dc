"""The one module that knows about CuPy; array-namespace shims.

Kernels take arrays and call ``array_namespace(...)`` (array-api-compat) to get
``xp``; they never import cupy. The device is chosen once per process here,
from ``EVAL_DEVICE`` (``auto``: CuPy when it imports and sees a GPU; ``cpu``;
``gpu``: CuPy or fail). Operations the array API lacks live below, each with
the reason it is here.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
from types import ModuleType
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_cupy_namespace

__all__ = ["accumulate_rows", "argsort_descending", "array_namespace", "backend", "bincount", "contiguous",
           "cummax_reverse", "cumsum64", "descending_key32", "device_name", "into", "lean_import", "non_negative",
           "scatter_set", "segment_sums", "to_device", "to_numpy"]


@functools.cache
def backend() -> Any:
    """The namespace loaded arrays are moved to: cupy or numpy (array-api-compat wrapped)."""
    choice = os.environ.get("EVAL_DEVICE", "auto").lower()
    if choice not in {"auto", "cpu", "gpu"}:
        raise ValueError(f"Expected EVAL_DEVICE to be auto, cpu or gpu, but got {choice!r}")
    if choice != "cpu":
        try:
            import cupy  # noqa: F401  (only this module imports cupy)
            from array_api_compat import cupy as compat_cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                return compat_cupy
        except Exception as exc:  # ImportError, CUDA driver errors
            if choice == "gpu":
                raise RuntimeError(f"EVAL_DEVICE=gpu but CuPy cannot use a GPU: {exc}") from exc
    return numpy_namespace()


@functools.cache
def numpy_namespace() -> Any:
    """``array_api_compat.numpy``, imported without ``numpy.testing`` and ``numpy.f2py`` (``lean_import``)."""
    lean_import("array_api_compat.numpy")
    from array_api_compat import numpy as compat_numpy

    return compat_numpy


_import_lock = threading.Lock()


# numpy submodules in ``numpy.__all__`` that no namespace here needs: test helpers, the Fortran wrapper
# generator, polynomials, string and record arrays, ctypes helpers (NumPy still imports one when it is
# asked for by name: ``numpy.ma``, which ``np.unique`` asks for, is not worth leaving out).
_UNUSED_SUBMODULES = frozenset({"testing", "f2py", "polynomial", "char", "rec", "strings", "ctypeslib"})


def lean_import(name: str) -> ModuleType:
    """Import ``name`` without the numpy submodules that an array-api-compat copy's ``from numpy import *``
    pulls in through ``numpy.__all__`` (``_UNUSED_SUBMODULES``): ``numpy.testing`` and ``numpy.f2py``
    alone were 0.05-0.4 s of a scorer process's start, the others 7 ms
    (``array_api_compat.numpy``, and scipy's own copy of it, which ``scipy.sparse`` imports).
    """
    with _import_lock:  # numpy.__all__ is shared: one import at a time trims and restores it
        if name not in sys.modules:
            full = np.__all__
            np.__all__ = [item for item in full if item not in _UNUSED_SUBMODULES]
            try:
                importlib.import_module(name)
            finally:
                np.__all__ = full
    return sys.modules[name]


def device_name() -> str:
    return "gpu" if is_cupy_namespace(backend()) else "cpu"


def to_device(array: np.ndarray, xp: Any = None) -> Any:
    """Move a host array into ``xp`` (the chosen backend by default)."""
    xp = xp or backend()
    return xp.asarray(array)


def contiguous(x: Any) -> Any:
    """x in C order (a copy when it is not): NumPy and CuPy gather rows fastest from it."""
    xp = array_namespace(x)
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    if is_cupy_namespace(xp):
        return xp.ascontiguousarray(x)
    return x


def into(op: str, a: Any, b: Any, out: Any) -> Any:
    """``op`` ("multiply", "divide"...) of a and b in ``out``'s dtype, written into ``out`` where the
    namespace can (NumPy, CuPy: no temporary of the result's size, integers converted on the fly),
    else a new array (both converted first: the array API does not mix kinds); use the value returned."""
    xp = array_namespace(out)
    if isinstance(out, np.ndarray) or is_cupy_namespace(xp):
        return getattr(xp, op)(a, b, out=out)
    return getattr(xp, op)(xp.astype(a, out.dtype), xp.astype(b, out.dtype))


def to_numpy(array: Any) -> np.ndarray:
    """Bring an array back to the host, at the result edge only."""
    if hasattr(array, "get"):  # cupy
        return np.asarray(array.get())
    return np.asarray(array)


def argsort_descending(x: Any) -> Any:
    """Stable argsort of a 1-D float array, largest first, ties (and -0.0 beside 0.0) in index order.

    NumPy's stable sort of floats is a merge sort; when every value is a
    float32 (scores of the binary form, of most models), the float's 32
    order-preserving bits and the index pack into one unique uint64 key, and
    an unstable sort of those keys (SIMD on NumPy, radix on CuPy) gives the
    same order 15 times faster at 21 M values. Otherwise, and under
    namespaces without bit views, the plain stable argsort.
    """
    xp = array_namespace(x)
    n = int(x.shape[0])
    key = descending_key32(x) if 1 << 16 <= n < 1 << 32 else None
    if key is None:
        return xp.argsort(x, descending=True, stable=True)
    key <<= 32
    key |= xp.arange(n, dtype=xp.uint64)
    key = xp.sort(key, stable=False)  # unique keys: the unstable (SIMD) sort is exact
    key &= 0xFFFFFFFF
    return xp.astype(key, xp.int64)


def descending_key32(x: Any) -> Any | None:
    """(N,) uint64 keys in 0..2**32-1 whose ascending order is ``x``'s descending order, equal for equal
    values (-0.0 and 0.0 alike); None unless every value of ``x`` is a float32 (and bits can be viewed).

    Packing them beside an index (a sample, a rank) makes one unique integer key, sorted by
    NumPy's unstable SIMD sort in a tenth of the time of a stable sort of the floats.
    """
    xp = array_namespace(x)
    if not hasattr(x, "view") or x.shape[0] == 0:
        return None
    x32 = xp.astype(x, xp.float32)
    if not bool(xp.all(x32 == x)):  # compared in x's precision, without a widened copy
        return None
    bits = (x32 + xp.asarray(0.0, dtype=xp.float32)).view(xp.uint32)  # -0.0 + 0.0 is +0.0
    ascending = bits ^ xp.where(bits >= 1 << 31, xp.asarray(0xFFFFFFFF, dtype=xp.uint32),
                                xp.asarray(0x80000000, dtype=xp.uint32))
    return xp.astype(~ascending, xp.uint64)


def bincount(x: Any, minlength: int, weights: Any = None) -> Any:
    """``bincount``: not in the array API; numpy and cupy share the signature.

    Under array_api_strict (tests) it falls back to a host round trip, so the
    kernels stay runnable there.
    """
    xp = array_namespace(x)
    if hasattr(xp, "bincount"):
        return xp.bincount(x, weights=weights, minlength=minlength)
    host = np.bincount(np.asarray(x), weights=None if weights is None else np.asarray(weights),
                       minlength=minlength)
    return xp.asarray(host)


GIL_FREE_ROW = 500
"""NumPy releases the GIL in ``ufunc.accumulate`` only when the loop it calls is longer than this
(``NPY_BEGIN_THREADS_THRESHOLDED``), counted as the *rows* of a 2-D array: a (b, P) block of
resamples (b <= 100) keeps the GIL for all its length. Its rows are accumulated one by one instead
(``accumulate_rows``): each a 1-D loop of P, the same additions in the same order, GIL released."""


def accumulate_rows(x: Any, op: str, reverse: bool = False) -> Any:
    """Running ``op`` ("add" or "maximum") along the last axis of x, from the right with ``reverse``,
    in x's dtype (NumPy would widen int32 sums to int64; callers check that the sums fit).

    Row by row on NumPy when rows are longer than ``GIL_FREE_ROW`` (see there), so that the threads
    computing blocks of resamples run at once; bit for bit the same as one ``accumulate`` call.
    The array API has no cumulative max; numpy and cupy have ``maximum.accumulate``.
    """
    xp = array_namespace(x)
    ufunc = getattr(xp, op, None)
    if ufunc is None or not hasattr(ufunc, "accumulate"):  # array_api_strict (tests): a host round trip
        return xp.asarray(accumulate_rows(to_numpy(x), op, reverse))
    if isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[1] > GIL_FREE_ROW and x.shape[0] > 1:
        out = np.empty(x.shape, dtype=x.dtype)
        source, target = (x[:, ::-1], out[:, ::-1]) if reverse else (x, out)
        accumulate = getattr(np, op).accumulate
        for row in range(x.shape[0]):  # a loop over resamples, each a long 1-D loop without the GIL
            accumulate(source[row], out=target[row], dtype=x.dtype)
        return out
    if reverse:
        return xp.flip(ufunc.accumulate(xp.flip(x, axis=-1), axis=-1, dtype=x.dtype), axis=-1)
    return ufunc.accumulate(x, axis=-1, dtype=x.dtype)


def cummax_reverse(x: Any) -> Any:
    """Running maximum from the right along the last axis (a precision envelope)."""
    return accumulate_rows(x, "maximum", reverse=True)


def cumsum64(x: Any, axis: int = -1) -> Any:
    """Cumulative sum accumulated in float64 (counts of millions of predictions stay exact)."""
    xp = array_namespace(x)
    return xp.cumulative_sum(xp.astype(x, xp.float64), axis=axis)


def segment_sums(x: Any, starts: Any, xp: Any = None) -> Any:
    """Sums of ``x`` (b, R) along its last axis over the segments [starts[j], starts[j+1]), in float64.

    ``starts`` (J,) strictly increasing, ``starts[0] == 0``; the last segment ends at R.
    NumPy's ``add.reduceat`` does it in one pass; elsewhere a running sum and two takes.
    ``xp`` may be given: callers in a loop over row chunks skip looking it up each time.
    """
    xp = xp or array_namespace(x)
    native = getattr(getattr(xp, "add", None), "reduceat", None)
    if native is not None and not is_cupy_namespace(xp):
        return native(x, starts, axis=-1, dtype=xp.float64)
    total = xp.concat([xp.zeros((x.shape[0], 1), dtype=xp.float64), cumsum64(x, axis=-1)], axis=-1)
    ends = xp.concat([starts[1:], xp.asarray([x.shape[-1]], dtype=starts.dtype)])
    return xp.take(total, ends, axis=-1) - xp.take(total, starts, axis=-1)


def non_negative(x: Any) -> Any:
    """``x`` with its negative values replaced by 0 (-0.0 and NaN kept): ``clip(x, 0, None)`` as
    array-api-compat computes it, in one comparison and one ``where`` instead of its six passes
    and Python-level checks (a third of the IoU kernels' clipping time)."""
    xp = array_namespace(x)
    return xp.where(x < 0, xp.zeros_like(x), x)


def scatter_set(x: Any, index: Any, values: Any) -> Any:
    """A copy of ``x`` with ``x[index] = values`` (1-D, integer ``index``).

    The array API has no fancy-index assignment. Callers pass unique indices
    (or equal values at repeated indices): CuPy leaves the winner among
    repeated indices unspecified.
    """
    xp = array_namespace(x)
    try:
        out = xp.asarray(x, copy=True)
        out[index] = values
        return out
    except (TypeError, IndexError):  # array_api_strict: no fancy __setitem__
        host = np.array(np.asarray(x), copy=True)
        host[np.asarray(index)] = np.asarray(values)
        return xp.asarray(host)
