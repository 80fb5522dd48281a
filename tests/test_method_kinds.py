"""Static methods, class methods and ``super()`` in methods of objects passed
in (or reached from a global callable object).

Before: ``self.g(x)`` with ``g`` a staticmethod and ``super().f(x)`` were
refused ("no adjoint rule"); ``obj.h(x)`` with ``h`` a classmethod passed the
*object* as ``cls``, so ``cls.scale`` read the object's attribute where Python
reads the class's: a silent wrong value and gradient."""

import numpy as np
import pytest

import s2sad
from tests.repeated import check_repeated_calls


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))


class Base:
    scale = 2.0

    def __init__(self, w):
        self.w = w
        self.scale = 5.0  # shadows the class attribute for the object

    def f(self, x):
        return np.sum(self.w * x)

    @classmethod
    def h(cls, x):
        return np.sum(x * x) * cls.scale  # the class's scale: 2.0


class Child(Base):
    def f(self, x):
        return super().f(x) * 2.0 + np.sum(x**2)

    @staticmethod
    def g(x):
        return np.sum(np.exp(x))

    def __call__(self, x):
        return self.f(x) + self.g(x) + self.h(x) + np.sum(self.w * x * self.scale)


model = Child(np.array([0.3, -1.2, 0.7]))


def through_global_object(x):
    return model(x)


def through_argument(x, obj):
    return obj.h(x) + obj.g(x) * obj.f(x)


def class_method_on_the_class(x):
    return Base.h(x)


def test_each_kind_against_central_differences():
    x = np.array([0.5, -0.4, 1.1])
    check_repeated_calls(through_global_object, (x,))
    check_repeated_calls(class_method_on_the_class, (x,))
    vg = s2sad.value_and_grad(through_argument)
    want = [
        (through_argument(x + 1e-6 * e, model) - through_argument(x - 1e-6 * e, model))
        / 2e-6
        for e in np.eye(3)
    ]
    for _ in range(3):
        value, g = vg(x, model)
        assert value == pytest.approx(through_argument(x, model), rel=1e-14)
        np.testing.assert_allclose(g, want, rtol=1e-6)


def class_method_through_object(x, obj):
    return obj.h(x)


def test_a_class_method_reads_the_class_not_the_object():
    x = np.array([1.0, 2.0])
    assert Base.h(x) == model.h(x) == 10.0  # Python: cls.scale is 2.0
    for _ in range(2):
        value, g = s2sad.value_and_grad(class_method_through_object)(x, model)
        assert value == 10.0
        np.testing.assert_allclose(g, 4.0 * x)  # 2 * x * 2.0, not 2 * x * 5.0


def test_forward_mode():
    x = np.array([0.5, -0.4, 1.1])
    s2sad.check_grads(through_global_object, (x,), modes=("rev", "fwd"))


class Derived(Base):
    def run(self, x):
        return super().h(x) * 3.0  # a classmethod through super(): cls is Derived


def through_super_class_method(x, obj):
    return obj.run(x)


def test_a_class_method_through_super_gets_the_class():
    x = np.array([1.0, 2.0])
    obj = Derived(np.array([0.1, 0.2]))
    assert through_super_class_method(x, obj) == 30.0  # 5 * 2.0 * 3, not 5 * 5.0 * 3
    for _ in range(2):
        value, g = s2sad.value_and_grad(through_super_class_method)(x, obj)
        assert value == 30.0
        np.testing.assert_allclose(g, 12.0 * x)
