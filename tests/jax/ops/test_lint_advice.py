"""Every ``nanguard.jax.<op>(...)`` call that the lint and detector advice prints runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import nanguard.jax as ng

CATALOGUES = sorted((Path(ng.__file__).resolve().parents[1] / "core").glob("catalogue_*.py"))
X = jnp.array([[0.0, 1.0, -2.0], [3.0, 0.0, 0.5]])
MASK = jnp.array([[True, False, True], [False, False, False]])


def _advised_names():
    text = "".join(path.read_text() for path in CATALOGUES)
    return set(re.findall(r"nanguard\.jax\.([a-z_]+)\b", text))


def test_every_advised_op_exists() -> None:
    missing = {name for name in _advised_names() if not hasattr(ng, name)}
    assert not missing, f"advice names nanguard.jax ops that do not exist: {missing}"


def test_advised_calls_run_as_written() -> None:
    x, mask, axis, p = X, MASK, -1, 0.5
    y, a, b, cond, fn, other, safe = jax.nn.softmax(X), X, X, X > 0, jnp.log, 0.0, 1.0
    calls = [
        ng.cross_entropy_probs(y, jax.nn.softmax(x)), ng.distance_matrix(x), ng.distance_matrix(x, x),
        ng.div(1, ng.pow(x, p)), ng.div(a, b), ng.div(a, b, fill=0.0), ng.entropy(y),
        ng.log_softmax(x, axis, mask=mask), ng.logsumexp(x, axis), ng.logsumexp(x, axis, mask=mask),
        ng.masked_mean(x, mask, axis), ng.norm(x, axis), ng.normalize(x, axis), ng.pow(x, p),
        ng.safe_where(cond, fn, x, other, safe), ng.softmax(x, axis, mask=mask), ng.softmax(x, axis, where=mask),
        ng.softplus(x), ng.sqrt(x), ng.std(x, axis), ng.var(x, axis), ng.xlogy(x, jnp.abs(x)),
        ng.xlogy(y, jax.nn.softmax(x)), ng.acos(jnp.tanh(x)), ng.asin(jnp.tanh(x)),
        ng.logaddexp(x, x), ng.cosine_similarity(x, x),
    ]
    assert all(np.all(np.isfinite(np.asarray(c)) | np.isneginf(np.asarray(c))) for c in calls)
