"""s2sad: source-to-source reverse-mode automatic differentiation for NumPy code.

import s2sad

@s2sad.grad
def loss(w, x, y):
    return np.mean((x @ w - y) ** 2)

g_w = loss(w, x, y)           # gradient with the shape of w
print(loss.source)            # the emitted gradient code
"""

from __future__ import annotations

from s2sad._version import __version__
from s2sad.runtime.registry import adjoint, nondifferentiable

__all__ = [
    "grad",
    "value_and_grad",
    "jvp",
    "hvp",
    "hessian",
    "jacobian",
    "jacfwd",
    "jacrev",
    "vjp",
    "check_grads",
    "register_pytree",
    "adjoint",
    "nondifferentiable",
    "allow_driver_pulls",
    "lazy_gradients",
    "data_parallel",
    "__version__",
]


_HOMES = {
    "grad": "api",
    "value_and_grad": "api",
    "jvp": "higher",
    "hvp": "higher",
    "hessian": "jacobians",
    "jacobian": "jacobians",
    "jacfwd": "functional",
    "jacrev": "functional",
    "vjp": "functional",
    "check_grads": "checks",
    "register_pytree": "runtime.pytrees",
    "allow_driver_pulls": "runtime.backend",
    "lazy_gradients": "runtime.backend",
    "data_parallel": "parallel",
}


def __getattr__(name: str):
    # The decorators are imported on first use so that `import s2sad` stays cheap
    # and generated modules (which import only s2sad.runtime) never load them.
    # Both public modules are imported together: s2sad.higher registers
    # grad(grad(f)) with s2sad.api, which cannot import it (higher builds on api).
    # Neither loads the compiler (gast, black) before the first compile.
    if name in _HOMES:
        import importlib

        from s2sad import api, higher  # noqa: F401 (higher registers grad of grad)

        return getattr(importlib.import_module(f"s2sad.{_HOMES[name]}"), name)
    raise AttributeError(f"module 's2sad' has no attribute {name!r}")
