"""A lambda passed to a user function (front/lambda_args.py): the copy made for
it, and the check that the global still names the function copied."""

from __future__ import annotations

import numpy as np

import s2sad
from s2sad import pipeline
from tests.corpus import cases_local_forms as lf
from tests.corpus.fd import assert_close_tree, numerical_grad


def test_the_copy_reads_the_lambdas_free_variables_from_the_caller():
    source, _ = pipeline.compile_function(lf.lambda_to_callee, (0, 1))
    # the lambda's body written where apply calls it; w passed to the copy
    assert "def apply_1_forward(x_1, w):\n    out = x_1 * w\n" in source
    assert "apply_1_forward(x, w)" in source
    assert "cases_local_forms.apply is not apply" in source  # the entry's check


def test_rebinding_the_callee_compiles_again(monkeypatch):
    w, x = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5])
    dfn = s2sad.grad(lf.lambda_to_callee, argnums=(0, 1))
    assert_close_tree(
        dfn(w, x)[0], numerical_grad(lf.lambda_to_callee, [w, x], 0), where="before"
    )

    def apply_twice(f, x):
        return f(f(x))

    monkeypatch.setattr(lf, "apply", apply_twice)
    got = dfn(w, x)[0]
    assert_close_tree(
        got, numerical_grad(lf.lambda_to_callee, [w, x], 0), where="after rebinding"
    )
