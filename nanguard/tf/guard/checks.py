"""The per-replica inspection of one step's gradients and its agreement across replicas.

`local_verdict` is the fast path: one ``is_finite`` reduction per gradient; only when this
replica has a non-finite value (a ``tf.cond``) does it count NaN and Inf per variable.
`agree` puts this replica's flag at its own index of a one-hot row, appends the counts and
all-reduces the whole vector once (``ReplicaContext.all_reduce``, SUM): every replica gets
the same vector, so every replica takes the same branch, and the vector also says which
replicas were bad. With one replica there is no collective.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

Grad = Optional[object]  # a tf.Tensor, a tf.IndexedSlices (embeddings) or None


def values(g: Grad) -> Optional[tf.Tensor]:
    """The dense values of a gradient (an IndexedSlices' rows), or None."""
    if g is None:
        return None
    if isinstance(g, tf.IndexedSlices):
        return g.values
    return tf.convert_to_tensor(g)


def _floating(v: tf.Tensor) -> bool:
    return v.dtype.is_floating or v.dtype.is_complex


def local_bad(grads: Sequence[Grad]) -> tf.Tensor:
    """True when any gradient of this replica holds a NaN or ±Inf."""
    flags = [tf.reduce_all(tf.math.is_finite(v)) for v in map(values, grads) if v is not None and _floating(v)]
    if not flags:
        return tf.constant(False)
    return tf.logical_not(tf.reduce_all(tf.stack(flags)))


def counts(grads: Sequence[Grad], positions: Sequence[int], n: int) -> tf.Tensor:
    """[variable, (NaN count, Inf count)] as float64, at each gradient's position among the n
    variables the optimizer was built with (integer and missing gradients count 0)."""
    rows: List[tf.Tensor] = []
    for v in map(values, grads):
        if v is None or not _floating(v):
            rows.append(tf.zeros((2,), tf.float64))
        else:
            rows.append(tf.stack([tf.reduce_sum(tf.cast(tf.math.is_nan(v), tf.float64)),
                                  tf.reduce_sum(tf.cast(tf.math.is_inf(v), tf.float64))]))
    stacked = tf.stack(rows) if rows else tf.zeros((0, 2), tf.float64)
    if list(positions) == list(range(n)):
        return stacked
    return tf.scatter_nd(tf.constant([[p] for p in positions], tf.int32), stacked, [n, 2])


def local_verdict(grads: Sequence[Grad], positions: Sequence[int], n: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """(this replica's flag, its per-variable counts); the counts are computed only when bad."""
    bad = local_bad(grads)
    found = tf.cond(bad, lambda: counts(grads, positions, n), lambda: tf.zeros((n, 2), tf.float64))
    return bad, found


def agree(bad: tf.Tensor, found: tf.Tensor) -> tf.Tensor:
    """[replica flags (num_replicas), counts (n*2)], summed over replicas; call in replica context."""
    ctx = tf.distribute.get_replica_context()
    size = ctx.num_replicas_in_sync if ctx is not None else 1
    flag = tf.cast(bad, tf.float64)
    if size == 1:
        return tf.concat([tf.reshape(flag, [1]), tf.reshape(found, [-1])], axis=0)
    row = tf.one_hot(ctx.replica_id_in_sync_group, size, dtype=tf.float64) * flag
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.concat([row, tf.reshape(found, [-1])], axis=0))


def zero_nonfinite(g: Grad) -> Grad:
    """The gradient with its NaN/Inf elements replaced by 0 (finite elements keep their bits)."""
    v = values(g)
    if v is None or not _floating(v):
        return g
    clean = tf.where(tf.math.is_finite(v), v, tf.zeros_like(v))
    if isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(clean, g.indices, g.dense_shape)
    return clean
