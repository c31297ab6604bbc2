"""The JAX FAQ's story: ``jnp.where`` around ``jnp.sqrt`` and a NaN gradient at 0.

A regression on the length of each (weighted) sample, ``sqrt(|x * w|²)``, guarded with
``jnp.where(sq > 0, jnp.sqrt(sq), 0.0)`` so a padding row (all zeros) gets length 0. The
value is right, but the gradient is not: ``jax.grad`` differentiates both branches of the
where, sqrt's derivative at 0 is inf, and the where multiplies it by 0: NaN. The second
batch holds a padding row, and plain Adam writes NaN into every weight:

    python -m nanguard.stories.jax_sqrt_where_nan
    nanguard run -m nanguard.stories.jax_sqrt_where_nan
"""

import jax
import jax.numpy as jnp
import optax

# three batches of (samples, target lengths); the second ends with a padding row of zeros
BATCHES = [
    ([[1.0, 2.0], [2.0, 1.0]], [2.0, 2.5]),
    ([[0.5, 1.5], [0.0, 0.0]], [1.5, 0.0]),
    ([[1.0, 1.0], [3.0, 0.5]], [1.5, 3.0]),
]


def loss_fn(w, x, y):
    sq = jnp.sum((x * w) ** 2, axis=-1)
    length = jnp.where(sq > 0, jnp.sqrt(sq), 0.0)
    return jnp.mean((length - y) ** 2)


def main(steps: int = 3, optimizer=None):
    """Train; return the last loss and the optimizer state."""
    w = jnp.array([1.0, 1.0])
    optimizer = optimizer or optax.adam(0.1)
    state = optimizer.init(w)
    update = jax.jit(optimizer.update)  # one compiled optimizer step instead of dozens of eager ops
    for i in range(steps):
        x, y = (jnp.array(t) for t in BATCHES[i % len(BATCHES)])
        loss, grads = jax.value_and_grad(loss_fn)(w, x, y)
        updates, state = update(grads, state, w)
        w = optax.apply_updates(w, updates)
        print(f"step {i + 1}: loss {float(loss):.4f}  w [{float(w[0]):.4f}, {float(w[1]):.4f}]")
    return float(loss), state


if __name__ == "__main__":
    main()
