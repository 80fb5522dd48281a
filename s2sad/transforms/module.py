"""The state of one emitted module while the pipeline builds it (both modes).

A module holds the top-level function and every user function it calls with
differentiated arguments, each compiled once per pattern of differentiated
arguments (a :class:`Job`).  Names the emitted code binds at load time
(``np``, the user's globals, rules) are collected here so that emit can write
the imports once.
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass, field
from typing import Any

from s2sad.binding import object_key
from s2sad.options import Options
from s2sad.transforms import astutil, comments
from s2sad.transforms.astutil import Namer, anno, name
from s2sad.transforms.front import parse

#: runtime helpers (s2sad.runtime.support) that reverse-mode code may call
HELPERS = (
    "accumulate",
    "unbroadcast",
    "finalize",
    "item_of",
    "written_item",
    "without_item",
    "split_last",
    "copy_item",
    "restore_item",
    "keep_item",
    "redo_items",
    "pad",
    "take_rows",
    "zeros",
    "check_finite",
    "NO_WORKSPACE",
    "globals_changed",
    "refused",
    "structure_changed",
)
#: locals of every emitted function (no module-level name may take them)
LOCALS = ("tape", "g_out", "saved", "ws", "_")
#: helpers of s2sad.runtime.tangents that forward-mode code may call
TANGENT_HELPERS = (
    "or_zeros",
    "filled",
    "broadcast_like",
    "zero_entry",
    "set_item",
    "restore_tangent",
    "finish",
    "jvp_scalar",
    "jvp_reduction",
)


@dataclass
class Job:
    """One function to compile, and what the passes have made of it so far.

    ``names`` are the emitted functions' names: ``(f_value_and_grad,)`` for the
    reverse top level, ``(f_forward, f_backward)`` for a reverse callee,
    ``(f_jvp,)`` in forward mode.  ``pattern`` says, per parameter, whether it
    is differentiated (forward mode: 2 when its tangent may hold None entries).
    """

    parsed: parse.ParsedFunction
    names: tuple[str, ...]
    pattern: tuple[int, ...]
    top: bool
    site: Any = None  # forward mode: the call whose missing rule this job replaces
    namer: Namer | None = None
    norm: Any = None  # the Normalizer (local functions, re-assigned names)
    act: Any = None  # the Activity of the function's names
    state: Any = None  # the mode's per-function generator (reverser / forward)
    fwd: list[ast.stmt] = field(default_factory=list)  # reverse: the forward sweep
    bwd: list[ast.stmt] = field(default_factory=list)  # reverse: the backward sweep
    body: list[ast.stmt] = field(default_factory=list)  # forward: primal + tangents
    functions: list[ast.stmt] = field(default_factory=list)  # what it emits
    renamed: dict[str, str] = field(default_factory=dict)  # hygiene: new -> user's name
    #: globals naming classes whose objects front/instances.py took apart: guarded
    inlined_classes: list[str] = field(default_factory=list)

    @property
    def node(self) -> ast.FunctionDef:
        return self.parsed.node

    @property
    def params(self) -> list[str]:
        a = self.parsed.node.args
        return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]

    @property
    def wrt(self) -> list[str]:
        return [p for p, code in zip(self.params, self.pattern) if code]

    @property
    def codes(self) -> dict[str, int]:
        return {p: c for p, c in zip(self.params, self.pattern) if c}


@dataclass
class ModuleBuilder:
    """Collects the functions, imports and bindings of one emitted module."""

    options: Options
    mode: str = "reverse"  # or "forward"
    top_fn: Any = None
    #: the top-level call's arguments by parameter (empty when compiled ahead of time)
    examples: dict[str, Any] = field(default_factory=dict)
    namer: Namer = field(
        default_factory=lambda: Namer(set(LOCALS) | set(dir(builtins)))
    )
    #: the emitted functions' names (front/hygiene.py keeps user names off them)
    function_names: set[str] = field(default_factory=set)
    functions: list[ast.stmt] = field(default_factory=list)
    bindings: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, list | None] = field(default_factory=dict)
    #: specialised globals: where the code reads one now (``model.helper``) -> the
    #: binding it was compiled for; the entry function checks them first (guards pass)
    guards: dict[str, str] = field(default_factory=dict)
    #: attribute -> (source, node) of a write of a differentiated value / a read
    #: (front/objects.py refuses an attribute found in both)
    attribute_writes: dict[str, tuple] = field(default_factory=dict)
    attribute_reads: dict[str, tuple] = field(default_factory=dict)
    #: attribute -> the functions (ids of ParsedFunction) writing a differentiated
    #: value to it; a callee's entry reads (read_attribute), checked once every
    #: function is compiled (front/objects.py ``check_entry_reads``)
    attribute_writers: dict[str, set] = field(default_factory=dict)
    entry_reads: list[tuple] = field(default_factory=list)
    top_parsed: Any = None
    #: (callee job id, caller id, call id) -> (callee job, caller, in a loop)
    call_sites: dict[tuple, tuple] = field(default_factory=dict)
    rule_imports: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    #: rule aliases whose calls a pass took out (reverse/spreads.py): imported
    #: only if something still reads them
    maybe_unused: set[str] = field(default_factory=set)
    helpers_used: set[str] = field(default_factory=set)
    comments: list[str] = field(default_factory=list)
    jobs: dict[tuple, Job] = field(default_factory=dict)  # callee specialisations
    queue: list[Job] = field(default_factory=list)  # callees not compiled yet

    @property
    def helper_names(self) -> tuple[str, ...]:
        """Names of runtime helpers this mode's code may use (kept out of user names)."""
        return HELPERS + (TANGENT_HELPERS if self.mode == "forward" else ())

    # -- names shared by all functions of the module
    def helper(self, fn_name: str) -> ast.expr:
        self.helpers_used.add(fn_name)
        node = name(fn_name)
        anno(node)["helper"] = fn_name  # which one, whatever the name emitted
        return node

    def comment(self, text: str) -> ast.stmt:
        self.comments.append(text)
        return comments.marker(len(self.comments) - 1)

    def origin_comment(self, what: str, source, lineno: int) -> ast.stmt:
        """``# grad of: <source line>`` (or ``tangent of:``) above generated code."""
        return self.comment(f"{what} of: {source.line(lineno).strip()}")

    def bind(
        self, wanted: str, obj: Any, origin: list | None = None, avoid=frozenset()
    ) -> str:
        """A module-level name for ``obj``, preferably ``wanted``, and none of
        ``avoid`` (the locals of the function that reads it, which would shadow it).

        ``origin`` says how a later process finds the object again without
        compiling: ``["module", module_name, name]`` or ``["closure", name]``.
        """
        if wanted in self.bindings and self.bindings[wanted] is obj:
            if wanted not in avoid:
                return wanted
        for existing, value in self.bindings.items():
            if value is obj and existing not in avoid:
                return existing
        alias = wanted
        if wanted in self.bindings or wanted in self.namer.used or wanted in avoid:
            alias = self.namer.fresh(wanted)
            while alias in avoid:
                alias = self.namer.fresh(wanted)
        else:
            self.namer.reserve(wanted)
        self.bindings[alias] = obj
        self.origins[alias] = origin
        return alias

    def rule_ref(self, fn) -> ast.expr:
        """A name for the rule function ``fn``, annotated with it (``rule``)."""
        mod = getattr(fn, "__module__", "") or ""
        if mod.startswith("s2sad.runtime."):
            key = f"{mod}.{fn.__name__}"
            if key not in self.rule_imports:
                alias = self.namer.fresh(fn.__name__)
                self.rule_imports[key] = (mod, fn.__name__, alias)
            node = name(self.rule_imports[key][2])
        else:
            origin = ["module", mod, fn.__name__] if mod else None
            node = name(self.bind(fn.__name__, fn, origin))
        anno(node)["rule"] = fn
        return node

    # -- user functions called with differentiated arguments
    def request(
        self,
        info,
        pattern: tuple,
        caller: parse.ParsedFunction,
        local_functions: dict,
        site: Any = None,
        scalars: tuple = (),
        in_loop: bool | None = None,
        call: Any = None,
    ) -> Job:
        """The job compiling a called user function for ``pattern`` (queued if new).

        ``scalars``: per argument of the call, whether it is an immutable scalar,
        or ``"fresh"``: a new array nobody else holds (part of the key: a job
        compiled for a scalar serves only such calls).  ``call``: the call site,
        in a loop of the caller or not (how often a callee runs: call_sites).
        """
        job = self._request(info, pattern, caller, local_functions, site, scalars)
        key3 = (id(job), id(caller), id(call) if call is not None else None)
        if in_loop is None:  # forward mode: from where the call is
            in_loop = call is None or astutil.in_loop(caller.node, call)
        self.call_sites[key3] = (job, caller, in_loop)
        return job

    def _request(self, info, pattern, caller, local_functions, site, scalars) -> Job:
        if info.kind == "local":
            local = local_functions[info.target]
            key: tuple = ("local", id(local.node), pattern)
            base = info.target
        else:
            # a method: compiled for the receiver's class, whose object its own
            # method calls (self.g(...)) are resolved on, and for the classes
            # of the objects it holds (self.activation_func(x))
            receiver = info.extra.get("receiver")
            key = ("user", info.target, pattern, object_key(receiver))
            base = info.target.__name__
            if base == "__call__":  # a callable object: Sigmoid_call_forward
                base = info.target.__qualname__.split(".")[-2] + "_call"
        examples = info.extra.get("examples") or {}
        if examples:  # objects passed to a plain function: its code depends on them
            key = (*key, tuple(sorted((k, object_key(v)) for k, v in examples.items())))
        scalars = tuple(b if b == "fresh" else bool(b) for b in scalars)
        if any(scalars):
            key = (*key, scalars)
        job = self.jobs.get(key)
        if job is not None:
            return job
        if self.mode == "forward":
            names: tuple[str, ...] = (self.namer.fresh(f"{base}_jvp"),)
        else:
            fwd = self.namer.fresh(f"{base}_forward")
            names = (fwd, self.namer.fresh(f"{base}_backward"))
        self.function_names.update(names)
        if info.kind == "local":
            fresh = self.mode == "forward" or any(scalars)  # a second job of the node
            node = copy.deepcopy(local.node) if fresh else local.node
            parsed = parse.ParsedFunction(
                node, caller.source, caller.env, local_functions=local_functions
            )
        else:
            parsed = parse.parse_function(info.target)
            if receiver is not None and parsed.node.args.args:
                parsed.example_args = {parsed.node.args.args[0].arg: receiver}
            parsed.example_args = {**parsed.example_args, **examples}
        a = parsed.node.args
        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        if len(params) == len(scalars):
            parsed.scalar_params = {p for p, b in zip(params, scalars) if b is True}
            parsed.fresh_params = {p for p, b in zip(params, scalars) if b == "fresh"}
        job = Job(parsed, names, tuple(pattern), top=False, site=site)
        self.jobs[key] = job
        self.queue.append(job)
        return job

    # -- dry runs (forward mode tries a statement, then takes it back)
    def snapshot(self) -> tuple:
        return (
            set(self.namer.used),
            len(self.comments),
            dict(self.jobs),
            list(self.queue),
            dict(self.bindings),
            dict(self.origins),
            dict(self.guards),
            dict(self.rule_imports),
            set(self.helpers_used),
        )

    def restore(self, snap: tuple) -> None:
        used, n_comments, jobs, queue, bindings, origins, guards, imports, helpers = (
            snap
        )
        self.namer.used = used
        self.guards = guards
        del self.comments[n_comments:]
        self.jobs, self.queue = jobs, queue
        self.bindings, self.origins = bindings, origins
        self.rule_imports, self.helpers_used = imports, helpers
