"""Preallocated buffers for emitted gradient code (``ws`` in the generated source).

With the workspace optimization on, the top-level gradient function takes a
``ws`` argument and passes buffers to NumPy as ``out=``::

    matmul = np.matmul(x, W1, out=ws["matmul"])       # code that runs once per call
    h = np.tanh(add_2, out=ws.take("h"))              # inside a loop

``ws["key"]`` is a buffer of the exact shape and dtype that site produced on an
earlier call with the same argument shapes and dtypes, or ``None`` (then NumPy
allocates, which is always correct).  ``ws.take("key")`` hands out a buffer of a
small ring only if nothing refers to it any more (its reference count is the one
of an unused buffer), so values kept on the tape, in names or in views are never
overwritten; when every buffer is busy it returns ``None`` and the ring grows
after the call.

The shapes come from a *recording call*: the second call for a new shape
signature (the first runs without buffers, so that a function called once
never pays for recording) runs a variant of the emitted function in which
every site is wrapped as ``ws.keep("key", <call>)``; :class:`Recorder` notes
each site's shape and dtype and how many of its results were alive at once.
Sites whose results were not arrays, or changed shape or dtype during the call,
get no buffer.  The variant is built by the compiler (its buffers/record
module, which reads the module's source) and handed to the :class:`Pool` as a
callable: the runtime never parses code.

The compiler only turns a call into a site when the shape of its result is fixed
by the argument shapes (no boolean masks, no data-dependent control flow feeding
it), so a buffer recorded once fits every later call with the same signature.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Callable

import numpy as np

from s2sad.runtime import outinto
from s2sad.runtime.shapekeys import MaskArgument, shape_key, value_free, value_key

_key = value_key  # (its former name here)

#: ring sizes never grow past this (a caller keeping every result would otherwise
#: make the workspace grow without bound; past it NumPy simply allocates)
MAX_RING = 64


#: stays empty: its ``get`` is the ``take`` of workspaces without rings
_NO_RINGS: dict = {}


class NoWorkspace(dict):
    """The default ``ws``: no buffers, so every site allocates as plain NumPy does."""

    def __missing__(self, key: str) -> None:
        self[key] = None  # later lookups of this site stay in C
        return None

    #: ``take(key)``: no ring, so None (an empty dict's ``get``: no Python frame)
    take = _NO_RINGS.get

    def result(self, i: int) -> None:
        return None

    def enter(self, name: str, args: tuple) -> "NoWorkspace":
        """The workspace of a called function (none here)."""
        return NO_WORKSPACE

    def link(self, saved: tuple, reads: tuple = ()) -> tuple:
        """A forward function's residuals, returned as they are (see Workspace)."""
        return saved

    def enter_linked(self, name: str, g: Any, saved: tuple, checks: tuple) -> Any:
        """The workspace of a backward function (none here; see Workspace)."""
        return NO_WORKSPACE


NO_WORKSPACE = NoWorkspace()


def _count(ring: list) -> int:
    for buf in ring:
        return sys.getrefcount(buf)
    return 0


#: reference count of a ring buffer nobody else holds, seen from Workspace.take
_FREE = _count([np.empty(1)])


class _Results(NoWorkspace):
    """No buffers, but the caller's ``out=`` arrays for ``finalize``: the ``ws``
    of a first call (and the base of the recording and buffered workspaces)."""

    def __init__(self, results: tuple | None):
        super().__init__()
        self.results = results

    def result(self, i: int) -> Any:
        """The caller's ``out=`` array(s) for gradient ``i`` (or ``None``)."""
        return None if self.results is None else self.results[i]


class _Takes(dict):
    """``ws.take``: None, in C, for a key without a ring (rings are made with
    the workspace or never); ``Workspace.take`` for a key with one."""

    def __missing__(self, key: str) -> np.ndarray | None:
        if key in self.ws.rings:
            return Workspace.take(self.ws, key)
        self[key] = None
        return None


class Workspace(_Results):
    """Buffers for one shape signature; used by one call at a time (see the pool)."""

    def __init__(
        self,
        layout: "Layout",
        results: tuple | None = None,
        root: Any = None,
        min_bytes: int = 0,
        plain_results: bool = False,
    ):
        super().__init__(results)
        self.layout = layout
        self.rings: dict[str, list] = {}
        self.misses: dict[str, int] = {}
        self.ids: set[int] = set()
        self.root = root if root is not None else self
        self.pending = False  # a callee met argument shapes nobody recorded
        self.children = {
            key: Workspace(child, root=self.root, min_bytes=min_bytes)
            for key, child in layout.children.items()
        }
        self.links: dict[int, tuple] = {}  # the root's: see link
        #: a forward callee's: (backward's name, key of its g_out, key of the
        #: forward's module reads) -> the backward's workspace
        self.after: dict[tuple, Workspace] = {}
        for (fkey, *at), bkey in layout.links.items():
            if fkey in self.children and bkey in self.children:
                self.children[fkey].after[tuple(at)] = self.children[bkey]
        small = {k for k, spec in layout.fixed.items() if _nbytes(spec) < min_bytes}
        if plain_results:  # no out=: a returned gradient's site allocates (no copy)
            small |= layout.results & layout.fixed.keys()
        for key in small:
            self[key] = None
        for key, spec in layout.fixed.items():
            if key in small:
                continue
            donor = layout.shares.get(key)
            if (
                donor in layout.fixed
                and layout.fixed[donor] == spec
                and self[donor] is not None
            ):
                self[key] = self[donor]  # the donor's value is dead when key is written
            else:
                self[key] = self._new(spec)
        for key, (spec, n) in layout.rings.items():
            if _nbytes(spec) >= min_bytes:
                self.rings[key] = [self._new(spec) for _ in range(n)]
        if not self.rings:  # every take is None: no method call for it
            self.take = _NO_RINGS.get
        else:  # a key without a ring (most: small sites) answered in C
            takes = _Takes()
            takes.ws, self.take = self, takes.__getitem__
        self.missed = False  # the root's: some take found every buffer busy
        for key in layout.disabled:
            self[key] = None

    def _new(self, spec: tuple) -> np.ndarray:
        buf = np.empty(spec[0], dtype=spec[1])
        self.ids.add(id(buf))
        _OWNED[id(buf)] = buf
        return buf

    def take(self, key: str) -> np.ndarray | None:
        """A free buffer of ``key``'s ring, or ``None`` (then NumPy allocates)."""
        ring = self.rings.get(key)
        if ring is None:
            return None
        for buf in ring:
            if sys.getrefcount(buf) <= _FREE:
                return buf
        self.misses[key] = self.misses.get(key, 0) + 1
        self.root.missed = True
        return None

    def enter(self, name: str, args: tuple) -> NoWorkspace:
        """The workspace of a called function for these argument shapes."""
        child = self.children.get((name, shape_key(args)))
        if child is None:
            self.root.pending = True
            return NO_WORKSPACE
        return child

    def link(self, saved: tuple, reads: tuple = ()) -> tuple:
        """A forward callee's residuals ``saved``, noted as computed in this
        workspace: the compiler proved that their shape key follows from this
        workspace's (its arguments') and the values ``reads`` of the module
        attributes the forward read, so the backward's workspace follows from
        them too (:meth:`enter_linked`), without a key of every residual."""
        self.root.links[id(saved)] = (saved, self, reads)
        return saved

    def enter_linked(self, name: str, g: Any, saved: tuple, checks: tuple) -> Any:
        """``enter(name, (g, saved))`` for a backward callee whose residuals a
        linked forward returned: the workspace the recording call found after
        that forward's, for ``g``'s key; without one, as ``enter``."""
        entry = self.root.links.pop(id(saved), None)
        if entry is not None and entry[0] is saved:
            child = entry[1].after.get((name, _g_key(g), _g_key(entry[2])))
            if child is not None:
                return child
        return self.enter(name, (g, saved))

    def grow(self) -> None:
        """After a call: add the buffers the call lacked (bounded by MAX_RING)."""
        if self.root.missed:
            self.root.missed = False
            self._grow()

    def _grow(self) -> None:
        for key, n in self.misses.items():
            ring = self.rings[key]
            spec = self.layout.rings[key][0]
            for _ in range(min(n, MAX_RING - len(ring))):
                ring.append(self._new(spec))
        self.misses.clear()
        for child in self.children.values():
            child._grow()

    def owns(self, a: Any) -> bool:
        """Whether ``a`` is one of the buffers or a view of one."""
        if type(a) is not np.ndarray:
            return False
        return id(a) in self.ids or (a.base is not None and id(a.base) in self.ids)


def _g_key(g: Any) -> Any:
    """The shape key of a backward's ``g_out`` (None for a boolean array)."""
    try:
        return value_key(g)
    except MaskArgument:
        return None


#: every workspace buffer alive, by id (weakly: a dropped workspace frees them)
_OWNED: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()


def owned(a: np.ndarray) -> bool:
    """Whether ``a`` is a workspace buffer: one reference to it is the workspace's
    own (a dict entry or a ring slot), which no code outside this call reads."""
    return _OWNED.get(id(a)) is a


def _nbytes(spec: tuple) -> int:
    shape, dtype = spec
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


class Layout:
    """What a recording call learned: per site, the shape/dtype and ring size."""

    def __init__(self) -> None:
        self.fixed: dict[str, tuple] = {}
        self.rings: dict[str, tuple] = {}
        self.disabled: set[str] = set()
        #: per called function and shape signature of its arguments
        self.children: dict[tuple, "Layout"] = {}
        #: site key -> key of a temporary that dies at that site (same buffer
        #: when their shapes and dtypes agree); from the function's buffer_shares
        self.shares: dict[str, str] = {}
        #: sites binding a returned gradient (the function's buffer_results): no
        #: buffer for them in calls without out= (finalize then copies nothing)
        self.results: set[str] = set()
        #: (forward child's key, backward's name, g_out's key, the key of the
        #: forward's module reads) -> backward child's key (see enter_linked)
        self.links: dict[tuple, tuple] = {}


class Recorder(_Results):
    """The ``ws`` of a recording call: hands out no buffers, notes every result."""

    def __init__(self, results: tuple | None = None, root: Any = None, key: Any = None):
        super().__init__(results)
        self.specs: dict[str, Any] = {}
        self.alive: dict[str, list] = {}
        self.need: dict[str, int] = {}
        self.looped: set[str] = set()
        self.bad: set[str] = set()
        self.children: dict[tuple, "Recorder"] = {}
        self.root = root if root is not None else self
        self.key = key  # (name, shape key): this callee's entry in its caller's
        self.links: dict[int, tuple] = {}  # the root's: residuals -> (them, child)
        self.after: dict[tuple, Any] = {}  # see Workspace.after; None: no link

    def enter(self, name: str, args: tuple) -> "Recorder":
        key = (name, shape_key(args))
        if key not in self.children:
            self.children[key] = Recorder(root=self.root, key=key)
        return self.children[key]

    def link(self, saved: tuple, reads: tuple = ()) -> tuple:
        self.root.links[id(saved)] = (saved, self, reads)
        return saved

    def enter_linked(self, name: str, g: Any, saved: tuple, checks: tuple) -> Any:
        """Enter as ``enter`` does, and note which workspace followed the linked
        forward's for ``g``'s key: only when the forward is a sibling, both keys
        are real (no boolean masks) and the residuals at ``checks`` (those whose
        shapes alone the compiler proved fixed) have keys that read no values;
        a second, different backward key for the same link drops it."""
        child = self.enter(name, (g, saved))
        entry = self.root.links.pop(id(saved), None)
        if entry is None or entry[0] is not saved:
            return child
        forward = entry[1]
        if forward.key is None or forward.key not in self.children:
            return child
        if self.children[forward.key] is not forward:
            return child
        at = (name, _g_key(g), _g_key(entry[2]))
        ok = (
            at[1] is not None
            and at[2] is not None
            and forward.key[1] is not None
            and child.key[1] is not None
            and all(value_free(saved[i]) for i in checks)
        )
        if not ok or forward.after.get(at, child.key) != child.key:
            forward.after[at] = None
        elif at not in forward.after:
            forward.after[at] = child.key
        return child

    def take(self, key: str) -> None:
        self.looped.add(key)
        return None

    def keep(self, keys: str | tuple, value: Any) -> Any:
        """Note ``value`` (a tuple of results when ``keys`` is a tuple); return it."""
        if isinstance(keys, tuple):
            parts = value if isinstance(value, tuple) else ()
            for i, key in enumerate(keys):
                self._note(key, parts[i] if i < len(parts) else None)
        else:
            self._note(keys, value)
        return value

    def _note(self, key: str, value: Any) -> None:
        if type(value) is not np.ndarray:
            self.bad.add(key)
            return
        spec = (value.shape, value.dtype)
        if self.specs.setdefault(key, spec) != spec:
            self.bad.add(key)
        alive = [r for r in self.alive.get(key, []) if r() is not None]
        alive.append(weakref.ref(value))
        self.alive[key] = alive
        self.need[key] = max(self.need.get(key, 0), len(alive))

    def layout(self) -> Layout:
        out = Layout()
        for key, spec in self.specs.items():
            if key in self.bad:
                continue
            if key in self.looped:
                out.rings[key] = (spec, min(self.need[key], MAX_RING))
            else:
                out.fixed[key] = spec
        out.disabled = set(self.bad)
        out.children = {key: rec.layout() for key, rec in self.children.items()}
        for key, rec in self.children.items():
            for at, bkey in rec.after.items():
                if bkey is not None:
                    out.links[(key, *at)] = bkey
        return out


class Pool:
    """Workspaces of one gradient function, per shape signature (thread-safe: a
    call pops a workspace and puts it back, so two threads never share one)."""

    MAX_SIGNATURES = 8

    def __init__(self, fn: Callable, recording: Callable[[], Callable]):
        """``recording()`` builds ``fn``'s recording variant (every site wrapped in
        ``ws.keep``); it is called once, when the pool first records."""
        self.fn = fn
        self._build_recording = recording
        self._recording: Callable | None = None
        self.layouts: dict[Any, Layout] = {}
        self.free: dict[Any, list] = {}
        self.seen: set = set()  # signatures called once: the second call records
        self.rerecords: dict[Any, int] = {}

    def call(self, key: Any, args: list, results: tuple | None) -> tuple[Any, Any]:
        """Run the function with a workspace for ``key``; (result, workspace).

        With ``out=`` arrays (``results``) every recorded site gets a buffer, so
        the call allocates no array of note; without, only sites of at least
        SPEED_BYTES do (smaller NumPy temporaries are cheaper than the
        bookkeeping of a buffer).
        """
        if key is None:  # see shape_key
            return self.fn(*args, ws=_Results(results)), None
        layout = self.layouts.get(key)
        if layout is None:
            if key not in self.seen:  # a function called once never pays for it
                if len(self.seen) > 1024:  # e.g. an int argument that changes per call
                    self.seen.clear()
                self.seen.add(key)
                return self.fn(*args, ws=_Results(results)), None
            return self._record(key, args, results)
        full = results is not None
        free = self.free.setdefault((key, full), [])
        try:
            ws = free.pop()
        except IndexError:
            ws = Workspace(
                layout, min_bytes=0 if full else SPEED_BYTES, plain_results=not full
            )
        ws.results = results
        mine = {}  # sites writing into the caller's out= arrays: their own buffers
        if full:
            sites = getattr(self.fn, "buffer_results", None)
            for k, out in outinto.plan(results, args, layout, sites).items():
                if ws[k] is not None:
                    mine[k], ws[k] = ws[k], out
        try:
            return self.fn(*args, ws=ws), ws
        finally:
            ws.results = None
            ws.update(mine)
            ws.links.clear()  # residuals no backward took (an exception)
            ws.grow()
            if not (ws.pending and self._forget(key)):
                ws.pending = False
                free.append(ws)

    def _forget(self, key: Any) -> bool:
        """A callee met argument shapes nobody recorded: drop ``key``'s workspaces
        so that its next call records again.  Three times at most (callee shapes
        that keep changing just go without buffers); False when not dropped."""
        n = self.rerecords.get(key, 0)
        if n >= 3:
            return False
        self.rerecords[key] = n + 1
        self._drop(key)
        return True

    def _drop(self, key: Any) -> None:
        self.layouts.pop(key, None)
        self.free.pop((key, True), None)
        self.free.pop((key, False), None)

    def _record(self, key: Any, args: list, results: tuple | None):
        if self._recording is None:
            self._recording = self._build_recording()
        rec = Recorder(results)
        value = self._recording(*args, ws=rec)
        if len(self.layouts) >= self.MAX_SIGNATURES:
            self._drop(next(iter(self.layouts)))
        layout = rec.layout()
        layout.shares = dict(getattr(self.fn, "buffer_shares", {}))
        layout.results = set(getattr(self.fn, "buffer_results", ()))
        self.layouts[key] = layout
        return value, None


#: without ``out=``, sites whose results are smaller than this get no buffer: NumPy
#: reuses small freed blocks cheaply, while glibc returns blocks of 128 KiB and
#: more to the kernel, so those pay page faults on every call
SPEED_BYTES = 128 * 1024

#: below this many bytes of array arguments the buffers cost more than they save
#: (an ``out=`` keyword makes a ufunc call slower than its tiny allocation)
SMALL_BYTES = 64 * 1024


def worthwhile(values: list) -> bool:
    """Whether a call with these arguments gets the buffered form: some argument
    is a container (of parameters), or the array arguments hold SMALL_BYTES."""
    total = 0
    for v in values:
        t = type(v)
        if t is np.ndarray:
            total += v.nbytes
        elif t is dict or t is list or t is tuple:
            return True
    return total >= SMALL_BYTES
