"""How the public modules fit together: s2sad.api never imports s2sad.higher,
``import s2sad`` stays light, grad of grad goes through the registry that
s2sad.higher fills, and the version is written once."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad import api, binding, cache
from s2sad.errors import NonDifferentiableArgumentError
from tests import forward_cases as fc

REPO = Path(__file__).resolve().parents[1]


def python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_api_source_never_imports_or_names_higher():
    path = REPO / "s2sad" / "api.py"
    assert "s2sad.higher" not in imported_modules(path)
    assert "s2sad.forward" not in imported_modules(path)
    strings = {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    assert not any(s in ("s2sad.higher", "s2sad.forward") for s in strings)
    assert "importlib" not in imported_modules(path)


def test_importing_api_does_not_import_higher():
    proc = python(
        "import sys, s2sad.api\n"
        "assert 's2sad.higher' not in sys.modules, 'higher'\n"
        "print('ok')"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_public_names_load_no_compiler():
    """``s2sad.grad`` and ``s2sad.jvp`` load both public modules, not gast/black."""
    proc = python(
        "import sys, s2sad\n"
        "s2sad.grad, s2sad.jvp\n"
        "assert 's2sad.api' in sys.modules and 's2sad.higher' in sys.modules\n"
        "heavy = ('gast', 'black', 's2sad.pipeline', 's2sad.transforms', 's2sad.cache')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_grad_of_grad_through_the_lazy_package_attribute(tmp_path):
    """In a fresh process, ``s2sad.grad`` alone is enough for grad(grad(f))."""
    script = tmp_path / "second.py"
    script.write_text(
        "import s2sad\n"
        "def cube(x):\n"
        "    return x * x * x\n"
        "print(s2sad.grad(s2sad.grad(cube))(2.0))\n"
    )
    proc = python(f"import runpy; runpy.run_path({str(script)!r}, run_name='second')")
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) == pytest.approx(12.0)


def test_grad_of_grad_is_the_registered_rule():
    outer = s2sad.grad(s2sad.grad(fc.cube_times))
    np.testing.assert_allclose(outer(0.5, np.ones(3)), 6 * 0.5 * 3)
    assert api._derivative_rule(s2sad.grad(fc.cube_times)) is not None


def test_grad_of_a_grad_without_the_rule_says_what_to_import(monkeypatch):
    monkeypatch.setattr(api, "_DERIVATIVE_RULES", {})
    with pytest.raises(TypeError, match="import s2sad"):
        api.grad(api.grad(fc.cube_times))


@pytest.mark.parametrize("make", ["jvp", "hvp", "hessian", "jacobian"])
def test_grad_refuses_every_forward_mode_object(make):
    made = getattr(s2sad, make)(fc.cube_times)
    assert isinstance(made, api.ForwardFunction)
    with pytest.raises(TypeError, match=f"grad of a {type(made).__name__} .*s2sad.hvp"):
        s2sad.grad(made)
    with pytest.raises(TypeError, match="not supported"):
        s2sad.value_and_grad(made)


@pytest.mark.parametrize("name", ["grad", "value_and_grad"])
def test_decorators_are_named_functions(name):
    fn = getattr(s2sad, name)
    assert fn.__name__ == name and fn.__module__ == "s2sad.api"
    assert list(inspect.signature(fn).parameters) == [
        "fun",
        "argnums",
        "has_aux",
        "optimize",
        "debug_nans",
    ]
    assert fn.__doc__ and "gradient" in fn.__doc__.lower()


def test_decorator_forms_still_refuse_positional_argnums():
    with pytest.raises(TypeError, match="argnums by keyword"):
        s2sad.grad(1)
    with pytest.raises(TypeError, match="argnums by keyword"):
        s2sad.value_and_grad((0, 1))
    assert isinstance(s2sad.grad(argnums=1)(fc.cube_times), api.GradientFunction)


def test_forward_mode_checks_arguments_like_grad():
    """One check for both modes: the same path in the message, jvp says 'derivatives'."""
    params = {"W": np.ones(2), "n": 3}
    with pytest.raises(NonDifferentiableArgumentError) as grad_err:
        binding.check_differentiable(params, "p", 0)
    assert str(grad_err.value).startswith("argument 'p'['n'] (argnums=0) is int 3")
    with pytest.raises(
        NonDifferentiableArgumentError, match=r"'a' \(argnums=0\).*deriv"
    ):
        s2sad.jvp(fc.cube_times)(np.arange(3), np.ones(3), np.ones(3))


def test_call_binding_fast_path_matches_signature_bind():
    def f(a, b, c=2.0):
        return a

    call = binding.CallBinding(inspect.signature(f))
    assert call.bind((1.0, 2.0, 3.0)) == [1.0, 2.0, 3.0]
    assert call.bind((1.0,), {"b": 5.0}) == [1.0, 5.0, 2.0]
    assert call.names == ["a", "b", "c"]


def test_type_signatures_keep_their_meaning():
    assert binding.type_signature([1.0, 2]) == "-,i;scalar"
    # arrays by dtype, lists/tuples/dicts apart from floats (likes.py relies on it)
    assert binding.type_signature([np.ones(2), 3]).startswith("a<f8,i")
    assert binding.type_signature([np.ones(2, np.float32), 1.0, [1.0]]).startswith(
        "a<f4,-,l-"
    )
    assert binding.object_signature([np.ones(2), 3, "s"]) == "a<f8,-,-"
    assert binding.object_signature([(1.0,), {}, 1.0]) == "t-,d-,f"
    assert binding.object_signature([np.float64(1), np.float32(1), 1]) == "float64,-,-"
    assert binding.object_signature([fc]) == "builtins.module"


def test_entry_function_is_the_first_the_module_defines():
    import types

    module = types.ModuleType("emitted")
    module.helper_from_elsewhere = python  # bound in: belongs to another module
    exec(  # noqa: S102
        "def f_value_and_grad(x):\n    return x\n\ndef a_helper(x):\n    return x\n",
        module.__dict__,
    )
    assert cache.entry_function(module).__name__ == "f_value_and_grad"


def test_version_is_written_once():
    from s2sad import _version
    from s2sad.transforms import emit

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    assert s2sad.__version__ == _version.__version__ == emit.VERSION
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "s2sad._version.__version__"
