"""The array libraries of the conformance suite, as NumPy round trips.

Each library is a :class:`Library`: NumPy arrays in (``to``), NumPy arrays out
(``back``), so a test runs one function on NumPy and on the library and compares.
A library that is not installed (or CuPy without a GPU) is skipped, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import s2sad


@dataclass
class Library:
    name: str
    to: Callable[[np.ndarray], Any]
    back: Callable[[Any], np.ndarray]
    array_type: type
    device: Any


def _torch() -> Library:
    torch = pytest.importorskip("torch", reason="torch is not installed")
    return Library(
        "torch",
        lambda a: torch.asarray(a),
        lambda t: t.detach().cpu().numpy(),
        torch.Tensor,
        torch.device("cpu"),
    )


def _strict(device_name: str | None) -> Library:
    xp = pytest.importorskip(
        "array_api_strict", reason="array-api-strict is not installed"
    )
    device = None if device_name is None else xp.Device(device_name)
    cpu = xp.Device("CPU_DEVICE")
    return Library(
        "array_api_strict" + ("" if device is None else f":{device_name}"),
        lambda a: xp.asarray(a, device=device),
        lambda x: np.asarray(x.to_device(cpu)),
        type(xp.asarray(0.0)),
        device or cpu,
    )


def _cupy() -> Library:
    try:
        import cupy
    except ImportError:
        pytest.skip(
            "CuPy is not installed (the CuPy cases run where CuPy and a GPU are)"
        )
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
    except Exception as exc:  # noqa: BLE001 - no CUDA driver or device
        pytest.skip(f"CuPy is installed but no CUDA GPU is usable ({exc})")
    return Library("cupy", cupy.asarray, cupy.asnumpy, cupy.ndarray, cupy.cuda.Device())


#: the libraries every conformance test runs on ("device1": array-api-strict's
#: second device, the stand-in for a GPU)
MAKERS = {
    "torch": _torch,
    "array_api_strict": lambda: _strict(None),
    "array_api_strict_device1": lambda: _strict("device1"),
    "cupy": _cupy,
}


@pytest.fixture(params=sorted(MAKERS))
def lib(request) -> Library:
    return MAKERS[request.param]()


def convert(value: Any, lib: Library) -> Any:
    """NumPy arrays (in dicts, lists, tuples) as ``lib``'s arrays; the rest as is."""
    if isinstance(value, np.ndarray):
        return lib.to(value)
    if isinstance(value, dict):
        return {k: convert(v, lib) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [convert(v, lib) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def check_against_numpy(
    lib: Library, fn: Callable, args: list, argnums: Any = 0, rtol: float = 1e-12
) -> None:
    """``value_and_grad(fn)`` on ``lib``'s arrays equals NumPy's (float64), and
    each gradient is a ``lib`` array of its argument's shape on its device."""
    want_value, want = s2sad.value_and_grad(fn, argnums=argnums)(*args)
    value, got = s2sad.value_and_grad(fn, argnums=argnums)(*convert(args, lib))
    assert isinstance(value, lib.array_type)
    np.testing.assert_allclose(lib.back(value), want_value, rtol=rtol, atol=1e-14)
    many = isinstance(argnums, tuple)
    _same_tree(got if many else (got,), want if many else (want,), lib, rtol)


def _same_tree(got: Any, want: Any, lib: Library, rtol: float) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            _same_tree(got[k], want[k], lib, rtol)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same_tree(g, w, lib, rtol)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, lib.array_type), type(got)
        assert str(got.dtype).endswith(str(want.dtype)), (got.dtype, want.dtype)
        import array_api_compat

        assert array_api_compat.device(got) == lib.device
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(lib.back(got), want, rtol=rtol, atol=1e-13)
    else:  # a Python float parameter: a 0-d array of the library (or a float)
        value = got if isinstance(got, float) else lib.back(got)
        np.testing.assert_allclose(value, want, rtol=rtol, atol=1e-13)
