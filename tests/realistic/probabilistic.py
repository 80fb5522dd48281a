"""Probabilistic models: likelihoods and posteriors as statisticians write them, with SciPy."""

import numpy as np
from scipy import special, stats
from scipy.special import expit, gammaln, logsumexp

from tests.realistic.registry import labels, normal, program


def _glm(rng):
    X = normal(rng, 20, 3)
    return normal(rng, 3, scale=0.3), X, (rng.random(20) > 0.5).astype(float)


@program(_glm)
def bayesian_logistic_log_posterior(w, X, y):
    # autograd/examples/bayesian_optimization style prior + likelihood
    logits = X @ w
    log_lik = np.sum(y * logits - np.logaddexp(0, logits))
    log_prior = -0.5 * np.dot(w, w)
    return -(log_lik + log_prior)


@program(_glm)
def logistic_regression_expit(w, X, y):
    p = expit(X @ w)
    eps = 1e-12
    return -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))


@program(_glm)
def probit_regression(w, X, y):
    z = X @ w
    return -np.sum(y * stats.norm.logcdf(z) + (1 - y) * stats.norm.logcdf(-z))


def _counts(rng):
    X = normal(rng, 15, 3, scale=0.5)
    return normal(rng, 3, scale=0.2), X, rng.poisson(2.0, size=15).astype(float)


@program(_counts)
def poisson_regression_nll(beta, X, counts):
    eta = X @ beta
    return -np.sum(counts * eta - np.exp(eta) - gammaln(counts + 1))


@program(_counts)
def poisson_regression_scipy(beta, X, counts):
    return -np.sum(stats.poisson.logpmf(counts, np.exp(X @ beta)))


def _negbin(rng):
    return (
        np.array([0.3, -0.2]),
        1.5,
        normal(rng, 12, 2),
        rng.poisson(3.0, size=12).astype(float),
    )


@program(_negbin, argnums=(0, 1))
def negative_binomial_nll(beta, r, X, y):
    mu = np.exp(X @ beta)
    ll = (
        gammaln(y + r)
        - gammaln(r)
        - gammaln(y + 1)
        + r * np.log(r / (r + mu))
        + y * np.log(mu / (r + mu))
    )
    return -np.sum(ll)


def _dirichlet(rng):
    p = rng.dirichlet(np.ones(4), size=6)
    return np.log(np.array([1.5, 2.0, 0.7, 1.2])), p


@program(_dirichlet)
def dirichlet_log_likelihood(log_alpha, P):
    alpha = np.exp(log_alpha)
    n = P.shape[0]
    norm = gammaln(np.sum(alpha)) - np.sum(gammaln(alpha))
    return -(n * norm + np.sum((alpha - 1) * np.log(P)))


def _gmm(rng):
    K, D = 3, 2
    return normal(rng, K, D), np.zeros(K), normal(rng, 25, D)


@program(_gmm, argnums=(0, 1))
def gaussian_mixture_nll(means, logit_weights, X):
    # spherical unit-variance mixture, log-sum-exp over components
    log_w = logit_weights - logsumexp(logit_weights)
    sq = np.sum((X[:, None, :] - means[None, :, :]) ** 2, axis=2)
    log_comp = -0.5 * sq - 0.5 * X.shape[1] * np.log(2 * np.pi)
    return -np.sum(logsumexp(log_comp + log_w, axis=1))


def _hmm(rng):
    K, T = 3, 6
    return normal(rng, K, K, scale=0.5), normal(rng, K, scale=0.5), normal(rng, T, K)


@program(_hmm, argnums=(0, 1))
def hmm_forward_log_likelihood(log_trans_raw, log_init_raw, log_obs):
    # autograd/examples/hmm_em.py: forward algorithm in log space
    log_trans = log_trans_raw - logsumexp(log_trans_raw, axis=1, keepdims=True)
    log_alpha = log_init_raw - logsumexp(log_init_raw) + log_obs[0]
    for t in range(1, log_obs.shape[0]):
        log_alpha = logsumexp(log_alpha[:, None] + log_trans, axis=0) + log_obs[t]
    return -logsumexp(log_alpha)


def _gp(rng):
    X = np.sort(rng.uniform(-2, 2, size=8))
    return np.array([0.1, 0.0, -1.0]), X, np.sin(X) + 0.1 * rng.normal(size=8)


def rbf_kernel(x1, x2, log_ell, log_sf):
    d = (x1[:, None] - x2[None, :]) / np.exp(log_ell)
    return np.exp(2 * log_sf) * np.exp(-0.5 * d**2)


@program(_gp)
def gp_marginal_likelihood(theta, X, y):
    # autograd/examples/gaussian_process.py, with a Cholesky factor
    log_ell, log_sf, log_noise = theta[0], theta[1], theta[2]
    K = rbf_kernel(X, X, log_ell, log_sf) + np.exp(2 * log_noise) * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return (
        0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(X) * np.log(2 * np.pi)
    )


@program(_gp)
def gp_marginal_likelihood_slogdet(theta, X, y):
    K = rbf_kernel(X, X, theta[0], theta[1]) + np.exp(2 * theta[2]) * np.eye(len(X))
    sign, logdet = np.linalg.slogdet(K)
    return 0.5 * y @ np.linalg.solve(K, y) + 0.5 * logdet


def _mvn(rng):
    A = normal(rng, 3, 3, scale=0.3)
    return normal(rng, 3), A @ A.T + np.eye(3), normal(rng, 10, 3)


@program(_mvn, argnums=(0, 1))
def multivariate_normal_fit(mean, cov, X):
    return -np.sum(stats.multivariate_normal.logpdf(X, mean, cov))


def _robust(rng):
    X = normal(rng, 14, 2)
    return (
        np.array([0.5, -0.3]),
        0.2,
        X,
        X @ np.array([1.0, -1.0]) + rng.standard_t(3, size=14),
    )


@program(_robust, argnums=(0, 1))
def student_t_regression(w, log_scale, X, y):
    resid = y - X @ w
    return -np.sum(stats.t.logpdf(resid, 4.0, loc=0.0, scale=np.exp(log_scale)))


def _mfvi(rng):
    return (
        normal(rng, 3, scale=0.1),
        np.full(3, -1.0),
        normal(rng, 5, 3),
        normal(rng, 10, 3),
        normal(rng, 10),
    )


@program(_mfvi, argnums=(0, 1))
def mean_field_elbo(mu, log_sigma, eps, X, y):
    # black-box variational inference (autograd/examples/black_box_svi.py) with fixed samples
    samples = mu + np.exp(log_sigma) * eps
    preds = samples @ X.T
    log_lik = -0.5 * np.sum((preds - y) ** 2, axis=1)
    log_prior = -0.5 * np.sum(samples**2, axis=1)
    entropy = np.sum(log_sigma) + 0.5 * len(mu) * (1 + np.log(2 * np.pi))
    return -(np.mean(log_lik + log_prior) + entropy)


def _softreg(rng):
    return normal(rng, 4, 3, scale=0.2), normal(rng, 9, 4), labels(rng, 9, 3)


@program(_softreg)
def softmax_regression_log_softmax(W, X, y):
    logp = special.log_softmax(X @ W, axis=1)
    return -np.mean(logp[np.arange(len(y)), y])


def _ordinal(rng):
    return (
        normal(rng, 3, scale=0.3),
        np.array([-1.0, 0.0, 1.0]),
        normal(rng, 11, 3),
        labels(rng, 11, 4),
    )


@program(_ordinal, argnums=(0, 1))
def ordinal_logistic_nll(w, cuts, X, y):
    eta = X @ w
    cdf = expit(cuts[None, :] - eta[:, None])
    upper = np.concatenate([cdf, np.ones((len(y), 1))], axis=1)
    lower = np.concatenate([np.zeros((len(y), 1)), cdf], axis=1)
    probs = upper - lower
    return -np.sum(np.log(probs[np.arange(len(y)), y] + 1e-12))


def _betabin(rng):
    return (
        np.array([0.5, 0.2]),
        np.array([8.0, 10.0, 6.0, 9.0]),
        np.array([3.0, 7.0, 1.0, 4.0]),
    )


@program(_betabin)
def beta_binomial_nll(log_ab, n, k):
    a, b = np.exp(log_ab[0]), np.exp(log_ab[1])
    ll = special.betaln(k + a, n - k + b) - special.betaln(a, b)
    return -np.sum(ll)
