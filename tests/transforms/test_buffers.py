"""The buffer passes, source in and source out (s2sad/transforms/buffers/)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from s2sad import pipeline
from s2sad.options import BUFFERED, PLAIN, SCALAR, Options
from s2sad.transforms.astutil import anno
from s2sad.transforms.buffers.facts import Facts
from s2sad.transforms.module import ModuleBuilder

BUFFERS = Path(pipeline.__file__).parent / "transforms" / "buffers"
#: the buffer passes' modules (the package may hold others, e.g. run-time recording)
PASS_MODULES = ("facts", "sites", "sharing", "wiring", "scalar")


def mlp(x, W):
    h = np.tanh(x @ W)
    return np.sum(h * h)


def mlp_recip(x, W):
    h = 1.0 / (x @ W)
    return np.sum(h * h)


def cell(h, W):
    return np.tanh(h @ W)


def net(x, W):
    a = cell(x, W)
    return np.sum(a * a)


def waves(x):
    return np.sin(x) * np.cos(x)


def after(pass_name: str, fn, example_args: tuple = ()) -> str:
    out: list[str] = []
    pipeline.compile_function(
        fn, (0,), None, example_args, dump_after=pass_name, dump=out.append
    )
    return "\n".join(out)


def test_sites_write_into_workspace_buffers():
    code = after("buffers", mlp)
    assert "matmul = np.matmul(x, W, out=ws['matmul'])" in code
    assert "h = np.tanh(matmul, out=ws['h'])" in code
    assert "into=(ws['g_x'],)" in code  # a rule that takes buffers
    assert "finalize(g_x, x, ws.result(0))" in code
    assert "def mlp_value_and_grad(x, W, g_out=1.0, ws=NO_WORKSPACE):" in code


def test_a_temporary_that_dies_at_a_site_is_shared_with_it():
    code = after("buffers", mlp_recip)  # -g_h * h / matmul
    shares = next(
        line for line in code.splitlines() if ".buffer_shares = " in line
    ).split(" = ", 1)[1]
    table = ast.literal_eval(shares)
    assert table["mul_3"] == "neg"  # mul_3 = neg * h: neg is read there last
    assert table["div"] == "mul_3"


def two_kernels(x, W):
    h = x @ W
    return np.sum(np.sin(h) * np.tanh(h))


def test_a_fused_kernel_is_a_site():
    """d_tanh's kernel (runtime/fused.py) writes into the site's buffer."""
    code = after("buffers", mlp)
    assert "g_matmul = tanh_grad(g_h, h, out=ws['g_matmul'])" in code
    # a kernel's call read by accumulate: a site of its own
    code = after("buffers", two_kernels)
    assert "sin_ct = sin_grad(g_sin, h, out=ws['sin_ct'])" in code
    assert "g_h = accumulate(g_h, sin_ct, out=ws['g_h.2'])" in code


def test_a_callee_enters_its_own_workspace_and_gets_ws_passed_on():
    code = after("connect", net)
    assert "ws = ws.enter('cell_forward', (h, W))" in code
    assert "out=ws.take('matmul')" in code
    assert "cell_forward(x, W, ws=ws)" in code
    assert "def net_value_and_grad(x, W, g_out=1.0, ws=NO_WORKSPACE):" in code


def test_buffers_follow_the_decision_in_the_options():
    big = (np.ones((256, 256)), np.ones((256, 256)))
    small = (np.ones((2, 2)), np.ones((2, 2)))
    assert "out=ws[" in after("buffers", mlp, big)
    assert "out=ws[" not in after("buffers", mlp, small)
    plain = Options(workspace=False)
    source, _ = pipeline.compile_function(mlp, (0,), plain, big)
    assert "ws" not in source


def test_scalar_rewrite_is_its_own_pass_for_scalar_calls():
    assert "np.sin(x)" in after("buffers", waves, (0.5,))
    assert "math.sin(x)" in after("scalar", waves, (0.5,))  # x holds a float
    assert "np.sin(x)" in after("scalar", waves, (np.ones(3),))
    names = [p[0] for p in pipeline.PASSES]
    assert names.index("scalar") == names.index("buffers") + 1


def test_options_decide_buffers_once_from_the_arguments():
    base = Options()
    assert base.for_call([]).buffers == BUFFERED  # ahead of time
    assert base.for_call([1.5, 2]).buffers == SCALAR
    assert base.for_call([[1.0, 2.0]]).buffers == SCALAR  # no array inside
    assert base.for_call([np.ones(2)]).buffers == PLAIN  # too small to pay
    assert base.for_call([np.ones((256, 256))]).buffers == BUFFERED
    assert base.for_call([{"w": np.ones(2)}]).buffers == BUFFERED  # a container
    assert Options(workspace=False).for_call([np.ones((256, 256))]).buffers == PLAIN
    decided = base.for_call([np.ones((256, 256))])
    assert decided.for_call([1.0]).buffers == BUFFERED  # decided stays decided
    assert "buffers" not in base.key() and "buffers=buffered" in decided.key()


def _facts(code: str, annotate) -> Facts:
    module = ModuleBuilder(Options())
    module.bind("np", np)
    tree = ast.parse(code)
    for node in ast.walk(tree):
        annotate(node)
    facts = Facts(module, {"x": False, "g": False})
    facts.collect(tree.body)
    facts.solve()
    return facts


def _mark_pops(node: ast.AST) -> None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "pop":
            anno(node)["tape"] = "pop"


def test_an_annotated_tape_pop_does_not_decide_a_names_kind():
    code = "h = np.tanh(x)\nh = tape.pop()\n"
    assert "h" in _facts(code, _mark_pops).known
    # the same text without the reverse pass's mark is an unknown call
    assert "h" not in _facts(code, lambda node: None).known


def _mark_guards(node: ast.AST) -> None:
    if isinstance(node, ast.If):
        anno(node.test)["guard"] = "g"


def test_an_annotated_guard_is_not_a_data_test():
    code = "y = np.tanh(x)\nif g is not None:\n    y = np.sin(x)\n"
    assert "y" not in _facts(code, _mark_guards).shaky
    assert "y" in _facts(code, lambda node: None).shaky


def test_the_buffer_passes_do_not_reimport_rule_modules():
    for stem in PASS_MODULES:
        text = (BUFFERS / f"{stem}.py").read_text()
        assert "importlib" not in text, stem
        assert "import_module" not in text, stem
        assert "rule_imports" not in text, stem


def scan(xs, W):
    h = xs[0]
    for t in range(2):
        h = np.tanh(h + xs[t] @ W)
    return np.sum(h)


def test_a_partial_rule_result_is_named_after_the_argument_it_belongs_to():
    out: list[str] = []
    pipeline.compile_function(
        scan, (1,), None, (), dump_after="buffers", dump=out.append
    )
    code = "\n".join(out)
    # d_matmul_rhs gives the cotangent of W (its second argument), not of xs[t]
    assert "ct_W = d_matmul_rhs(" in code, code
    assert "ct_xs_item" not in code
