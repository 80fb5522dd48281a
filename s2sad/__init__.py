"""s2sad: source-to-source reverse-mode automatic differentiation for NumPy code.

import s2sad

@s2sad.grad
def loss(w, x, y):
    return np.mean((x @ w - y) ** 2)

g_w = loss(w, x, y)           # gradient with the shape of w
print(loss.source)            # the emitted gradient code
"""

from __future__ import annotations

from s2sad.runtime.registry import adjoint, nondifferentiable

__version__ = "0.1.0"

__all__ = [
    "grad",
    "value_and_grad",
    "jvp",
    "hvp",
    "hessian",
    "jacobian",
    "adjoint",
    "nondifferentiable",
    "__version__",
]


def __getattr__(name: str):
    # The compiler side is imported lazily so that `import s2sad` stays cheap and
    # generated modules (which import only s2sad.runtime) never load it.
    if name in ("grad", "value_and_grad"):
        from s2sad import api

        return getattr(api, name)
    if name in ("jvp", "hvp", "hessian", "jacobian"):
        from s2sad import higher as forward

        return getattr(forward, name)
    raise AttributeError(f"module 's2sad' has no attribute {name!r}")
