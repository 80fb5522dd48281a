"""Layer classes with state on ``self``, written the way ML-From-Scratch and the
CS231n assignments write them: objects built inside the loss, caches read
back, per-step states written into attributes."""

import numpy as np

from tests.realistic.registry import labels, normal, program


class TanH:
    def __call__(self, x):
        return 2 / (1 + np.exp(-2 * x)) - 1

    def gradient(self, x):
        return 1 - np.power(self.__call__(x), 2)


class RNN:
    """ML-From-Scratch's RNN layer (forward pass), weights set by the caller."""

    def __init__(self, n_units, activation=None, bptt_trunc=5, input_shape=None):
        self.input_shape = input_shape
        self.n_units = n_units
        self.activation = TanH() if activation is None else activation
        self.trainable = True
        self.bptt_trunc = bptt_trunc
        self.W = None
        self.V = None
        self.U = None

    def forward_pass(self, X, training=True):
        self.layer_input = X
        batch_size, timesteps, input_dim = X.shape
        # Save these values for use in backprop.
        self.state_input = np.zeros((batch_size, timesteps, self.n_units))
        self.states = np.zeros((batch_size, timesteps + 1, self.n_units))
        self.outputs = np.zeros((batch_size, timesteps, input_dim))
        # Set last time step to zero for calculation of the state_input at time step zero
        self.states[:, -1] = np.zeros((batch_size, self.n_units))
        for t in range(timesteps):
            self.state_input[:, t] = X[:, t].dot(self.U.T) + self.states[:, t - 1].dot(
                self.W.T
            )
            self.states[:, t] = self.activation(self.state_input[:, t])
            self.outputs[:, t] = self.states[:, t].dot(self.V.T)
        return self.outputs


def _rnn(rng):
    return (
        normal(rng, 4, 3, scale=0.4),
        normal(rng, 4, 4, scale=0.4),
        normal(rng, 3, 4, scale=0.4),
        normal(rng, 2, 5, 3),
    )


@program(_rnn, argnums=(0, 1, 2))
def ml_from_scratch_rnn_forward(U, W, V, X):
    rnn = RNN(n_units=4, input_shape=(5, 3))
    rnn.U, rnn.W, rnn.V = U, W, V
    outputs = rnn.forward_pass(X)
    return np.mean((outputs - X) ** 2) + 0.01 * np.sum(rnn.states**2)


class AffineRelu:
    """A CS231n-style layer object: parameters in a dict, a cache for backward."""

    def __init__(self, W, b):
        self.params = {"W": W, "b": b}
        self.cache = None

    def forward(self, x):
        W, b = self.params["W"], self.params["b"]
        a = x.reshape(x.shape[0], -1).dot(W) + b
        out = np.maximum(0, a)
        self.cache = (x, a)
        return out


class TwoLayerNet:
    def __init__(self, W1, b1, W2, b2, reg=0.0):
        self.layer1 = AffineRelu(W1, b1)
        self.params = {"W2": W2, "b2": b2}
        self.reg = reg

    def loss(self, X, y):
        hidden = self.layer1.forward(X)
        scores = hidden.dot(self.params["W2"]) + self.params["b2"]
        shifted = scores - np.max(scores, axis=1, keepdims=True)
        log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
        N = X.shape[0]
        loss = -np.sum(log_probs[np.arange(N), y]) / N
        _, pre_activation = self.layer1.cache
        loss += 1e-3 * np.sum(pre_activation**2)  # activation penalty from the cache
        W1 = self.layer1.params["W"]
        loss += 0.5 * self.reg * (np.sum(W1 * W1) + np.sum(self.params["W2"] ** 2))
        return loss


def _two_layer(rng):
    return (
        normal(rng, 6, 5, scale=0.4),
        normal(rng, 5, scale=0.1),
        normal(rng, 5, 3, scale=0.4),
        normal(rng, 3, scale=0.1),
        normal(rng, 4, 2, 3),
        labels(rng, 4, 3),
    )


@program(_two_layer, argnums=(0, 1, 2, 3))
def cs231n_layer_objects_loss(W1, b1, W2, b2, X, y):
    model = TwoLayerNet(W1, b1, W2, b2, reg=0.1)
    return model.loss(X, y)


class BatchNormalization:
    """ML-From-Scratch's batch normalization: running statistics and the
    centered input kept on ``self`` and read back within the same pass."""

    def __init__(self, momentum=0.99):
        self.momentum = momentum
        self.trainable = True
        self.eps = 0.01
        self.running_mean = None
        self.running_var = None

    def initialize(self, shape):
        self.gamma = np.ones(shape)
        self.beta = np.zeros(shape)

    def forward_pass(self, X, training=True):
        # Initialize running mean and variance if first run
        if self.running_mean is None:
            self.running_mean = np.mean(X, axis=0)
            self.running_var = np.var(X, axis=0)
        if training and self.trainable:
            mean = np.mean(X, axis=0)
            var = np.var(X, axis=0)
            self.running_mean = (
                self.momentum * self.running_mean + (1 - self.momentum) * mean
            )
            self.running_var = (
                self.momentum * self.running_var + (1 - self.momentum) * var
            )
        else:
            mean = self.running_mean
            var = self.running_var
        # Statistics saved for backward pass
        self.X_centered = X - mean
        self.stddev_inv = 1 / np.sqrt(var + self.eps)
        X_norm = self.X_centered * self.stddev_inv
        output = self.gamma * X_norm + self.beta
        return output


def _batchnorm(rng):
    layer = BatchNormalization()
    layer.initialize(4)
    layer.gamma = 1.0 + normal(rng, 4, scale=0.1)
    return normal(rng, 6, 4), layer


@program(_batchnorm)
def ml_from_scratch_batchnorm_input_gradient(X, layer):
    return np.sum(np.tanh(layer.forward_pass(X, training=True)) ** 2)
