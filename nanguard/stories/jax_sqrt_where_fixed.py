"""The JAX FAQ's story, fixed: the double where.

The inner ``jnp.where`` gives sqrt a safe input (1 where ``sq = 0``), the outer one selects the
result, so neither branch meets sqrt's infinite derivative at 0: the gradient of the padding
row is 0 and training stays finite. (``nanguard.jax.safe_where(sq > 0, jnp.sqrt, sq)`` writes
the same two wheres for you.)

    nanguard run -m nanguard.stories.jax_sqrt_where_fixed
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
    length = jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)
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
