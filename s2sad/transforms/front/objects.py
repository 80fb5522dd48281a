"""Objects: attribute assignment (``self.x = v``) and the check that keeps it sound.

Normalize rewrites ``obj.attr = value`` (``obj`` a local name) into a call that
does what Python does, so the object holds the value after the differentiated
call (ML-From-Scratch's ``Dense.forward_pass`` caching its input)::

    self.layer_input = X    ->    store_attribute(self, "layer_input", X)

The write contributes nothing to a gradient.  A read of the same attribute
elsewhere in the differentiated call would carry one through the object, which
s2sad does not follow: the ``objects`` pass (both modes, after ``bind``) records,
for the whole module, every attribute written with a value that depends on the
differentiated arguments and every attribute read from a local object, and
refuses a name found in both, pointing at the read and the write.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from s2sad.errors import UnsupportedSyntaxError
from s2sad.runtime.objects import store_attribute
from s2sad.transforms.astutil import anno, const, copy_loc, name
from s2sad.transforms.front import activity as activity_pass
from s2sad.transforms.front.calls import CallInfo


def store(target: ast.Attribute, obj: ast.expr, value: ast.expr) -> ast.stmt:
    """The statement writing ``value`` into ``obj.<target.attr>``."""
    func = name("store_attribute")
    anno(func)["bind"] = (
        store_attribute,
        ["module", "s2sad.runtime.objects", "store_attribute"],
    )
    node = ast.Call(func=func, args=[obj, const(target.attr), value], keywords=[])
    copy_loc(node, target)
    anno(node)["call"] = CallInfo("rule", store_attribute)
    anno(node)["attribute_store"] = target.attr
    return copy_loc(ast.Expr(value=node), target)


def _stores(node: ast.FunctionDef):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and "attribute_store" in anno(sub):
            yield sub


def _attributes_read(fn, receiver) -> set[str]:
    """Attribute names a function called as plain Python reads (and, for a method,
    every method of its class: it may call them through ``self``)."""
    fns = [fn]
    if receiver is not None:
        fns += [v for v in vars(type(receiver)).values() if callable(v)]
    out = set()
    for f in fns:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        except (OSError, TypeError, SyntaxError):
            continue
        out |= {
            s.attr
            for s in ast.walk(tree)
            if isinstance(s, ast.Attribute) and isinstance(s.ctx, ast.Load)
        }
    return out


def run(job, module) -> None:
    """Record this function's attribute writes and reads; refuse a read of an
    attribute that some function of the module writes a differentiated value to."""
    stmts = list(activity_pass.simple_statements(job.node.body))
    flows = [activity_pass.flow(s) for s in stmts]
    varied = activity_pass.solve(job.node, job.wrt, flows, False).active
    source = job.parsed.source
    writes, reads = module.attribute_writes, module.attribute_reads
    problems = []
    for call in _stores(job.node):
        obj, value = call.args[0], call.args[2]
        if isinstance(obj, ast.Name) and obj.id in varied:
            problems.append(
                source.problem(
                    call,
                    f"attribute assignment on the differentiated value '{obj.id}'",
                    "keep differentiated values in local variables, lists or dicts",
                )
            )
        if isinstance(value, ast.Name) and value.id in varied:
            writes.setdefault(call.args[1].value, (source, call))
    funcs = {id(c.func) for c in ast.walk(job.node) if isinstance(c, ast.Call)}
    for sub in ast.walk(job.node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Load)
            and id(sub) not in funcs
            and isinstance(sub.value, ast.Name)
            and sub.value.id in job.norm.locals
        ):
            reads.setdefault(sub.attr, (source, sub))
    for call in (c for c in ast.walk(job.node) if isinstance(c, ast.Call)):
        info = anno(call).get("call")
        given = [a.id for a in call.args if isinstance(a, ast.Name)]
        if info is None or info.kind != "user" or set(given) & varied:
            continue
        # runs as plain Python: what it reads, it reads from the object as is
        for attr in _attributes_read(info.target, info.extra.get("receiver")):
            reads.setdefault(attr, (source, call))
    for attr in sorted(set(writes) & set(reads)):
        (rsrc, rnode), (wsrc, wnode) = reads[attr], writes[attr]
        what = ast.unparse(rnode if isinstance(rnode, ast.Attribute) else rnode.func)
        problems.append(
            rsrc.problem(
                rnode,
                f"'{what}' reads the attribute '{attr}', which the "
                f"differentiated call sets to a differentiated value (at line "
                f"{wnode.lineno} of {wsrc.filename}); s2sad does not carry "
                "gradients through attributes",
                "pass the value as an argument or return it, instead of reading it "
                "back from the object",
            )
        )
        del reads[attr]
    if problems:
        raise UnsupportedSyntaxError(problems)
