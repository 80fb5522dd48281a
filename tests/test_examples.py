"""The example scripts: their losses' gradients, and short end-to-end runs.

Every run uses the hidden ``--synthetic`` flag (tiny generated data), a fresh
``S2SAD_CACHE_DIR`` and ``S2SAD_DATA_DIR``, and loaders that fail if called,
so nothing here touches the network or the real datasets.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """Temp cache/data dirs, no real loaders, thread settings restored afterwards."""
    monkeypatch.setenv("S2SAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("S2SAD_DATA_DIR", str(tmp_path / "data"))
    for var in THREAD_VARS:  # main() sets these; monkeypatch restores them
        monkeypatch.setenv(var, os.environ.get(var, "1"))
    import s2sad.datasets as datasets

    def offline(*args, **kwargs):
        raise AssertionError("a test tried to load a real dataset")

    for name in ("load_mnist", "load_imdb", "load_glove"):
        monkeypatch.setattr(datasets, name, offline)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    yield tmp_path
    if cpus is not None:  # main() pins the process to --threads CPUs
        os.sched_setaffinity(0, cpus)


def example(name: str):
    """Import examples/<name>.py (needs the ``isolated`` fixture's sys.path)."""
    return importlib.import_module(name)


def run(name: str, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    argv = ["--synthetic", "--json", str(out), "--mem", "off", *extra]
    assert example(name).main(argv) == 0
    return json.loads(out.read_text())


# ----------------------------------------------------------------------------
# Gradients of the example losses against central differences (float64)
# ----------------------------------------------------------------------------


def directional_check(loss, params: dict, x, y, seed: int = 0) -> None:
    """<grad, v> against (loss(p + h v) - loss(p - h v)) / 2h for each parameter."""
    value, grads = s2sad.value_and_grad(loss)(params, x, y)
    assert np.isclose(value, loss(params, x, y), rtol=1e-12)
    rng = np.random.default_rng(seed)
    h = 1e-6
    for key, p in params.items():
        assert grads[key].shape == p.shape and grads[key].dtype == p.dtype
        v = rng.standard_normal(p.shape)
        plus = loss({**params, key: p + h * v}, x, y)
        minus = loss({**params, key: p - h * v}, x, y)
        fd = (plus - minus) / (2 * h)
        assert np.isclose(np.sum(grads[key] * v), fd, rtol=1e-5, atol=1e-8), key


def to64(params: dict) -> dict:
    return {k: v.astype(np.float64) for k, v in params.items()}


def test_rnn_gradient(isolated):
    m, common = example("rnn_mnist"), example("_common")
    x, y, _, _ = common.synthetic_digits(seed=1, n_train=6, n_test=1)
    params = to64(m.init_params(np.random.default_rng(1)))
    directional_check(m.loss, params, x.astype(np.float64), y)


def test_cnn_gradient(isolated):
    m = example("cnn_imdb")
    (x, y, _, _), table = m.synthetic_reviews(seed=2, maxlen=19, n_train=5, n_test=1)
    params = to64(m.init_params(np.random.default_rng(2), table, maxlen=19))
    directional_check(m.loss, params, x, y.astype(np.float64))


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mlp_gradient(isolated, activation):
    m, common = example("mlp_mnist"), example("_common")
    x, y, _, _ = common.synthetic_digits(seed=3, n_train=7, n_test=1)
    params = to64(m.init_params(np.random.default_rng(3), activation))
    directional_check(m.MODELS[activation][0], params, x.astype(np.float64), y)


def test_float32_params_give_float32_gradients(isolated):
    m, common = example("rnn_mnist"), example("_common")
    x, y, _, _ = common.synthetic_digits(seed=4, n_train=3, n_test=1)
    value, grads = s2sad.value_and_grad(m.loss)(
        m.init_params(np.random.default_rng(4)), x, y
    )
    assert value.dtype == np.float32
    assert {g.dtype for g in grads.values()} == {np.dtype(np.float32)}


# ----------------------------------------------------------------------------
# End-to-end runs on synthetic data: the loss falls, the outputs are written
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, extra",
    [
        ("rnn_mnist", ["--epochs", "4", "--lr", "0.1", "--batch-size", "50"]),
        ("cnn_imdb", ["--epochs", "3", "--lr", "0.01", "--maxlen", "40"]),
        ("mlp_mnist", ["--epochs", "3"]),
        ("mlp_mnist", ["--epochs", "3", "--activation", "relu", "--lr", "0.05"]),
    ],
)
def test_training_lowers_the_loss(isolated, name, extra):
    result = run(name, isolated, *extra)
    losses = [e["loss"] for e in result["epochs"]]
    assert len(losses) == int(extra[1])
    assert losses[-1] < 0.9 * losses[0], losses
    assert result["epochs"][-1]["test_accuracy"] > 0.7
    assert Path(result["gradient_file"]).parent == isolated / "cache"
    for row in result["epochs"]:
        assert {"loss", "train_accuracy", "test_accuracy", "seconds"} <= set(row)


def test_limit_and_progress_output(isolated, capsys):
    result = run("mlp_mnist", isolated, "--epochs", "1", "--limit", "120")
    assert result["n_train"] == 120 and result["options"]["limit"] == 120
    out, err = capsys.readouterr()
    assert "gradient code: " + result["gradient_file"] in out
    assert "epoch 1/1 [" in err and "2/2" in err  # 120 samples = 2 batches of 100


def test_no_memory_epoch_unless_asked(isolated, capsys):
    out = isolated / "m.json"
    example("mlp_mnist").main(["--synthetic", "--epochs", "1", "--json", str(out)])
    memory = json.loads(out.read_text())["memory"]
    assert memory["where"] == "off" and "bytes_per_epoch" not in memory
    assert "memory epoch" not in capsys.readouterr().err


def test_memory_counted_in_extra_epoch(isolated, capsys):
    out = isolated / "m.json"
    argv = ["--synthetic", "--epochs", "1", "--json", str(out), "--mem", "extra"]
    example("mlp_mnist").main(argv)
    assert "memory epoch [" in capsys.readouterr().err
    memory = json.loads(out.read_text())["memory"]
    assert memory["kind"] == "numpy-handler"
    # 5 steps of batch 100 at least allocate the (100, 100) float32 hidden layer
    assert memory["bytes_per_epoch"] > 5 * 100 * 100 * 4
    assert memory["allocations_per_epoch"] > 5


def test_allocation_counter_counts_exact_bytes(isolated):
    common = example("_common")
    with common.AllocationCounter() as counter:
        a = np.empty(1000, dtype=np.float64)
        b = np.zeros((30, 10), dtype=np.float32)
    assert counter.result() == {"alloc_bytes": 8000 + 1200, "alloc_count": 2}
    del a, b
    c = np.ones(10)  # after exit NumPy's own allocator is back
    assert counter.result()["alloc_count"] == 2 and c.sum() == 10


def test_threads_option_is_read_from_argv():
    sys.path.insert(0, str(EXAMPLES))
    try:
        common = importlib.import_module("_common")
    finally:
        sys.path.remove(str(EXAMPLES))
    read = common._threads_from_argv
    assert read(["--epochs", "2"]) == 1
    assert read(["--threads", "2"]) == 2 and read(["--threads=3"]) == 3


def test_plot_or_clear_message(isolated, capsys):
    png = isolated / "curves.png"
    result = run("mlp_mnist", isolated, "--epochs", "2", "--plot", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists()
        assert "matplotlib is not installed" in capsys.readouterr().err
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["epochs"]) == 2


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_epoch_bar_is_tqdm_on_a_terminal_else_plain(isolated, monkeypatch):
    progress = example("_progress").progress
    monkeypatch.setattr(sys, "stderr", Terminal())
    if importlib.util.find_spec("tqdm") is not None:
        bar = progress("epoch 1/2", 4)
        assert type(bar).__name__ == "TqdmBar"
        for done in range(1, 5):
            bar.update(done, 0.5)
        bar.close(0.25)
        shown = sys.stderr.getvalue()
        assert "epoch 1/2: 100%" in shown and "4/4" in shown and "loss 0.2500" in shown
        assert "batch/s" in shown  # the rate
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setitem(sys.modules, "tqdm", None)  # not installed
    bar = progress("epoch 1/2", 4)
    assert type(bar).__name__ == "PlainBar"
    bar.update(2, 0.5)
    bar.close(0.25)
    assert (
        "epoch 1/2 [" in sys.stderr.getvalue()
        and "4/4 loss 0.2500" in sys.stderr.getvalue()
    )
