"""Smoke test of bench/realistic_peers.py (the peer comparison itself is run by hand)."""

import numpy as np
import pytest

autograd = pytest.importorskip("autograd", reason="autograd is not installed")

from bench import realistic_peers
from tests.realistic import classic, nets


def test_two_programs_classified():
    programs = realistic_peers.load_programs(["rastrigin", "two_layer_net_loss"])
    assert [p.name for p in programs] == [
        "classic.rastrigin",
        "nets.two_layer_net_loss",
    ]
    results = realistic_peers.run(programs, ("s2sad", "autograd"), echo=None)
    cells = {p.fn.__name__: {c: r[c].status for c in r} for p, r in results}
    assert cells["rastrigin"] == {"s2sad": "right", "autograd": "right"}
    # X.dot(W1) with X a plain ndarray: autograd cannot trace through the method
    assert cells["two_layer_net_loss"]["s2sad"] == "right"
    assert results[1][1]["autograd"].cell() == "error (AttributeError)"
    text = realistic_peers.markdown(results, ("s2sad", "autograd"))
    assert "| right | 2 | 1 |" in text


def test_peer_copy_rebinds_numpy_without_leaking():
    import autograd.numpy as anp
    import autograd.scipy.special as asp
    import autograd.scipy.stats as ast

    copier = realistic_peers.PeerCopy(anp, asp, ast)
    fn = copier.value(nets.autograd_neural_net_log_posterior)
    assert fn.__globals__["np"] is anp
    helper = fn.__globals__["neural_net_predict"]
    assert helper is not nets.neural_net_predict
    assert helper.__globals__["np"] is anp
    assert helper.__globals__["_logsumexp"].__globals__["np"] is anp
    cls = copier.value(classic.Sigmoid)
    assert cls is not classic.Sigmoid and cls.__call__.__globals__["np"] is anp
    # the originals are untouched
    assert nets.np is np and classic.np is np
    assert nets.neural_net_predict.__globals__["np"] is np
