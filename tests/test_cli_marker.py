"""``s2sad compile FILE`` without ``-f``: functions marked by ``__s2sad__ = [...]``.

Run as a user runs it, in a subprocess: the examples compile without naming
their losses, and the result is the committed ``generated/`` file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.test_cli import REPO, run


@pytest.mark.parametrize(
    "example, files",
    [
        ("rnn_mnist", ["rnn_mnist_loss_grad.py"]),
        ("mlp_mnist", ["mlp_mnist_loss_tanh_grad.py", "mlp_mnist_loss_relu_grad.py"]),
    ],
)
def test_examples_compile_without_naming_the_loss(tmp_path, example, files):
    out = tmp_path / "out"
    proc = run(
        tmp_path, "compile", str(REPO / "examples" / f"{example}.py"), "-o", str(out)
    )
    assert sorted(Path(p).name for p in proc.stdout.split()) == sorted(files)
    for name in files:
        assert (out / name).read_text() == (REPO / "generated" / name).read_text()


MARKED = """\
import numpy as np
import s2sad

__s2sad__ = ["second", "first"]


def first(x):
    return np.sum(np.sin(x))


@s2sad.grad
def decorated(x):
    return np.sum(x * x)


def second(x, y):
    return np.sum(x * y)


def helper(x):
    return x
"""


def test_marked_and_decorated_functions_are_compiled_in_file_order(tmp_path):
    (tmp_path / "model.py").write_text(MARKED)
    proc = run(tmp_path, "compile", "model.py", "-o", "gen")
    assert proc.stdout.split() == [
        "gen/model_first_grad.py",
        "gen/model_decorated_grad.py",
        "gen/model_second_grad.py",
    ]
    # the marker leaves the function a plain function; -f still overrides it
    proc = run(tmp_path, "compile", "model.py", "-f", "helper", "-o", "gen2")
    assert proc.stdout.split() == ["gen2/model_helper_grad.py"]


@pytest.mark.parametrize(
    "marker, expected",
    [
        ('__s2sad__ = "loss"', "__s2sad__ must be a list of function names"),
        ("__s2sad__ = 3", "__s2sad__ must be a list of function names"),
        ('__s2sad__ = ["lose"]', "no function named 'lose' (found: loss)"),
        ("", '__s2sad__ = ["loss"]'),
    ],
)
def test_bad_markers_are_user_errors(tmp_path, marker, expected):
    source = f"""\
        import numpy as np
        {marker}

        def loss(x):
            return np.sum(x * x)
        """
    (tmp_path / "model.py").write_text(textwrap.dedent(source))
    proc = run(tmp_path, "compile", "model.py", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("model.py: ") and expected in proc.stderr
