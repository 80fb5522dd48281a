"""Simulations: integrators, PDE stencils and Monte Carlo estimates, differentiated in their parameters."""

import numpy as np

from tests.realistic.registry import normal, program


def _spring(rng):
    return np.array([1.3, 0.2]), np.array([1.0, 0.0])


@program(_spring)
def damped_oscillator_euler(params, state0, dt=0.05, steps=40):
    k, c = params[0], params[1]
    x, v = state0[0], state0[1]
    energy = 0.0
    for _ in range(steps):
        a = -k * x - c * v
        x = x + dt * v
        v = v + dt * a
        energy += 0.5 * v * v + 0.5 * k * x * x
    return energy * dt


def _projectile(rng):
    return 0.8, 12.0, 0.05


@program(_projectile, argnums=(0, 1, 2))
def projectile_with_drag(angle, speed, drag):
    # explicit Euler until the ball lands; the number of steps depends on the inputs
    dt = 0.01
    x, y = 0.0, 0.0
    vx, vy = speed * np.cos(angle), speed * np.sin(angle)
    t = 0.0
    while y >= 0.0 and t < 5.0:
        v = np.sqrt(vx * vx + vy * vy)
        vx = vx - dt * drag * v * vx
        vy = vy - dt * (9.81 + drag * v * vy)
        x = x + dt * vx
        y = y + dt * vy
        t += dt
    return x


def lotka_volterra(z, theta):
    alpha, beta, delta, gamma = theta
    prey, pred = z
    return np.array(
        [alpha * prey - beta * prey * pred, delta * prey * pred - gamma * pred]
    )


def _lv(rng):
    return np.array([1.0, 0.4, 0.3, 0.8]), np.array([2.0, 1.0])


@program(_lv, argnums=(0, 1))
def lotka_volterra_rk4(theta, z0, h=0.1, steps=20):
    z = z0
    total = 0.0
    for _ in range(steps):
        k1 = lotka_volterra(z, theta)
        k2 = lotka_volterra(z + 0.5 * h * k1, theta)
        k3 = lotka_volterra(z + 0.5 * h * k2, theta)
        k4 = lotka_volterra(z + h * k3, theta)
        z = z + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        total = total + z[0]
    return total * h


def _heat(rng):
    x = np.linspace(0, 1, 12)
    return np.sin(np.pi * x) + 0.1 * normal(rng, 12), 0.2


@program(_heat, argnums=(0, 1))
def heat_equation_explicit(u0, alpha, steps=15):
    u = u0.copy()
    for _ in range(steps):
        lap = np.zeros_like(u)
        lap[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
        u = u + alpha * lap
        u[0] = 0.0
        u[-1] = 0.0
    return np.sum(u**2)


def _wave(rng):
    return np.exp(-((np.arange(16) - 8.0) ** 2) / 4.0), 0.3


@program(_wave, argnums=(0, 1))
def wave_equation_periodic(u0, c, steps=10):
    u_prev = u0
    u = u0
    for _ in range(steps):
        lap = np.roll(u, 1) - 2 * u + np.roll(u, -1)
        u_next = 2 * u - u_prev + c**2 * lap
        u_prev, u = u, u_next
    return np.sum(u * np.arange(len(u)))


def _nbody(rng):
    return normal(rng, 4, 2), np.array([1.0, 2.0, 0.5, 1.5])


@program(_nbody, argnums=(0, 1))
def nbody_potential_energy(pos, masses, softening=0.1):
    n = pos.shape[0]
    energy = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            r = np.sqrt(np.sum((pos[i] - pos[j]) ** 2) + softening**2)
            energy -= masses[i] * masses[j] / r
    return energy


def _pendulum(rng):
    return 1.2, 0.0, 9.81


@program(_pendulum, argnums=(0, 1, 2))
def pendulum_leapfrog(theta0, omega0, g, length=1.0, dt=0.02, steps=50):
    theta, omega = theta0, omega0
    for _ in range(steps):
        omega_half = omega - 0.5 * dt * g / length * np.sin(theta)
        theta = theta + dt * omega_half
        omega = omega_half - 0.5 * dt * g / length * np.sin(theta)
    return theta**2 + omega**2


def _node(rng):
    return [normal(rng, 2, 8, scale=0.5), normal(rng, 8, 2, scale=0.5)], normal(
        rng, 5, 2
    )


def dynamics(params, z):
    W1, W2 = params
    return np.tanh(z @ W1) @ W2


@program(_node)
def neural_ode_euler(params, z0, dt=0.1, steps=10):
    # autograd/examples/ode_net.py with a fixed-step integrator
    z = z0
    for _ in range(steps):
        z = z + dt * dynamics(params, z)
    return np.mean(np.sum(z**2, axis=1))


def _spins(rng):
    return normal(rng, 6, 6, scale=0.5), 0.7


@program(_spins, argnums=(0, 1))
def continuous_ising_energy(phi, coupling):
    neighbours = np.roll(phi, 1, axis=0) + np.roll(phi, 1, axis=1)
    interaction = -coupling * np.sum(phi * neighbours)
    potential = np.sum(0.25 * phi**4 - 0.5 * phi**2)
    return interaction + potential


def _option(rng):
    return 100.0, 0.2, 0.03, normal(rng, 200)


@program(_option, argnums=(0, 1, 2))
def black_scholes_monte_carlo(spot, vol, rate, z, strike=105.0, T=1.0):
    st = spot * np.exp((rate - 0.5 * vol**2) * T + vol * np.sqrt(T) * z)
    payoff = np.log1p(np.exp(st - strike))  # softplus-smoothed call payoff
    return np.exp(-rate * T) * np.mean(payoff)


def _chain(rng):
    return np.linspace(0.0, 1.0, 8) + 0.05 * normal(rng, 8), 10.0


@program(_chain, argnums=(0, 1))
def hanging_chain_energy(heights, stiffness, g=9.81):
    dx = 1.0 / (len(heights) - 1)
    stretch = np.diff(heights) / dx
    elastic = 0.5 * stiffness * np.sum(np.sqrt(1.0 + stretch**2) - 1.0) * dx
    gravity = g * np.sum(heights) * dx
    return elastic + gravity
