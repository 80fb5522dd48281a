"""generators (run at the start of validate): a generator function returns the list of
what it yields; calls of generator functions become lists."""

import numpy as np

from tests.transforms.dumps import after, code


def layers(params):
    """Weights and biases."""
    for W, b in params:
        if W is None:
            return
        yield W, b
    yield from []


def uses_layers(params, x):
    for W, b in layers(params):
        x = np.tanh(x @ W + b)
    return np.sum(x)


def test_yields_become_appends_and_the_list_is_returned():
    params = [(np.eye(2), np.zeros(2))]
    text = after("validate", uses_layers, example_args=(params, np.ones(2)))
    assert code("""
        # uses_layers_value_and_grad
        def uses_layers(params, x):
            for W, b in list(layers(params)):
                x = np.tanh(x @ W + b)
            return np.sum(x)
    """) in text
    assert code("""
        def layers(params):
            \"\"\"Weights and biases.\"\"\"
            yielded = []
            for W, b in params:
                if W is None:
                    return list(yielded)
                yielded.append((W, b))
            for yielded_item_15_4 in []:
                yielded.append(yielded_item_15_4)
            return yielded
    """) in text
