"""Count the bytes of NumPy array buffers allocated while a block runs.

    with AllocationCounter() as counter:
        train_one_epoch()
    counter.result()   # {"alloc_bytes": ..., "alloc_count": ...}

A counting allocator is installed with NumPy's ``PyDataMem_SetHandler`` (its C
API, reached through ctypes) for the duration of the block: every ``malloc`` /
``calloc`` of array data is counted and then served by NumPy's default
allocator.  That is the scope of PyTorch's CPU-allocator figure in
``bench/train_torch.py`` (array / tensor storage, not Python objects), so the
two can be compared.  The callback costs a Python call per allocation (about
10% of an example's epoch), so the examples count in an untimed epoch.

Where the hook cannot be installed (a NumPy without that C API) the counter
falls back to the ``tracemalloc`` peak above the block's starting level;
``kind`` says which measure was taken.
"""

from __future__ import annotations

import ctypes
import tracemalloc
from typing import Any, Callable

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_CALLOC = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)
_REALLOC = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class _Allocator(ctypes.Structure):
    """NumPy's ``PyDataMemAllocator`` (numpy/ndarraytypes.h)."""

    _fields_ = [
        ("ctx", ctypes.c_void_p),
        ("malloc", _MALLOC),
        ("calloc", _CALLOC),
        ("realloc", _REALLOC),
        ("free", _FREE),
    ]


class _Handler(ctypes.Structure):
    """NumPy's ``PyDataMem_Handler``, version 1."""

    _fields_ = [
        ("name", ctypes.c_char * 127),
        ("version", ctypes.c_uint8),
        ("allocator", _Allocator),
    ]


class _CountingHandler:
    """A NumPy memory handler that counts malloc/calloc bytes, then defers.

    Allocation goes through NumPy's default handler (its small-block cache
    included); ``free`` and ``realloc`` are the default's C functions
    themselves, so arrays that outlive the counter (even until interpreter
    exit) never call back into Python.  Built once per process and kept
    alive forever for the same reason.
    """

    _instance: "_CountingHandler | None" = None

    def __init__(self) -> None:
        api, set_handler = _numpy_handler_api()
        default = ctypes.cast(api[306], ctypes.POINTER(ctypes.py_object)).contents.value
        base = _capsule_pointer(default, b"mem_handler", _Handler).allocator
        self.bytes = 0
        self.count = 0
        # The default functions are called as PYFUNCTYPE: a ctypes call that
        # releases the GIL would fail when NumPy allocates with the GIL released.
        self._base_malloc = _as_pyfunc(base.malloc, _MALLOC)
        self._base_calloc = _as_pyfunc(base.calloc, _CALLOC)
        self._malloc = _MALLOC(self._on_malloc)
        self._calloc = _CALLOC(self._on_calloc)
        allocator = _Allocator(base.ctx, self._malloc, self._calloc, base.realloc)
        allocator.free = base.free
        self._struct = _Handler(b"s2sad_examples_counting", 1, allocator)
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self.capsule = new_capsule(ctypes.addressof(self._struct), b"mem_handler", None)
        self.set_handler = set_handler
        # Arrays allocated through this handler read its struct when freed, which
        # may be at interpreter exit: leak one reference so it is never collected.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self))

    def _on_malloc(self, ctx: int, size: int) -> int:
        self.bytes += size
        self.count += 1
        return self._base_malloc(ctx, size)

    def _on_calloc(self, ctx: int, nelem: int, elsize: int) -> int:
        self.bytes += nelem * elsize
        self.count += 1
        return self._base_calloc(ctx, nelem, elsize)

    @classmethod
    def get(cls) -> "_CountingHandler":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


def _as_pyfunc(fn: Any, cfunctype: type) -> Any:
    """The C function pointer ``fn`` re-typed so that calls keep the GIL."""
    proto = ctypes.PYFUNCTYPE(cfunctype._restype_, *cfunctype._argtypes_)
    return proto(ctypes.cast(fn, ctypes.c_void_p).value)


def _capsule_pointer(capsule: Any, name: bytes | None, ctype: type) -> Any:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return ctypes.cast(get(capsule, name), ctypes.POINTER(ctype)).contents


def _numpy_handler_api() -> tuple[Any, Callable]:
    """NumPy's C-API table and its ``PyDataMem_SetHandler`` (slot 304, ABI-stable)."""
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as mu
    table = _capsule_pointer(mu._ARRAY_API, None, ctypes.c_void_p * 307)
    set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(table[304])
    return table, set_handler


class AllocationCounter:
    """Context manager measuring NumPy allocations; ``.result()`` after exit.

    ``kind`` is ``"numpy-handler"`` (total bytes and count of array buffers
    allocated) or, when that hook is unavailable, ``"tracemalloc-peak"`` (the
    peak of traced memory above the starting level; much slower).
    """

    def __init__(self) -> None:
        try:
            self._handler: _CountingHandler | None = _CountingHandler.get()
            self.kind = "numpy-handler"
        except Exception:  # private ABI missing: use the slow, portable measure
            self._handler = None
            self.kind = "tracemalloc-peak"
        self._start = (0, 0)
        self._stats: dict[str, int] = {}

    def __enter__(self) -> "AllocationCounter":
        if self._handler is not None:
            self._start = (self._handler.bytes, self._handler.count)
            self._previous = self._handler.set_handler(self._handler.capsule)
        else:
            tracemalloc.start()
            self._start = (tracemalloc.get_traced_memory()[0], 0)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._handler is not None:
            self._handler.set_handler(self._previous)
            self._stats = {
                "alloc_bytes": self._handler.bytes - self._start[0],
                "alloc_count": self._handler.count - self._start[1],
            }
        else:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            self._stats = {"peak_bytes": peak - self._start[0]}

    def result(self) -> dict[str, int]:
        return dict(self._stats)


MEMORY_WHAT = {
    "numpy-handler": "bytes and number of NumPy array buffers allocated during the "
    "training epoch (counting allocator via PyDataMem_SetHandler; Python objects "
    "not included)",
    "tracemalloc-peak": "tracemalloc peak above the level at the epoch's start",
}
