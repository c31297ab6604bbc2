"""Every rule: positive cases in several spellings, and near misses that must stay silent.

Each case is a snippet placed after `import math, numpy as np, torch, torch.nn.functional as
F, tensorflow as tf`. A positive must report its code; a negative must not.
"""

from __future__ import annotations

import pytest

POSITIVE = [
    # NG101 log(softmax)
    ("NG101", "y = torch.log(torch.softmax(x, dim=1))"),
    ("NG101", "y = torch.log(F.softmax(x, -1))"),
    ("NG101", "y = F.softmax(x, dim=-1).log()"),
    ("NG101", "y = x.softmax(-1).log()"),
    ("NG101", "y = torch.log(x.softmax(dim=1))"),
    ("NG101", "y = tf.math.log(tf.nn.softmax(logits))"),
    ("NG101", "y = tf.log(tf.nn.softmax(logits))"),
    ("NG101", "def f(x):\n    p = F.softmax(x, dim=-1)\n    return torch.log(p)"),
    ("NG101", "y = torch.log(torch.special.softmax(x, 0))"),
    # NG102 log(sigmoid)
    ("NG102", "y = torch.log(torch.sigmoid(x))"),
    ("NG102", "y = x.sigmoid().log()"),
    ("NG102", "y = torch.log(F.sigmoid(x))"),
    ("NG102", "y = torch.sigmoid(x).log()"),
    ("NG102", "y = tf.math.log(tf.sigmoid(x))"),
    ("NG102", "y = tf.math.log(tf.nn.sigmoid(x))"),
    ("NG102", "def f(x):\n    p = torch.sigmoid(x)\n    return p.log()"),
    # NG103 log(1 - sigmoid)
    ("NG103", "y = torch.log(1 - torch.sigmoid(x))"),
    ("NG103", "y = (1.0 - x.sigmoid()).log()"),
    ("NG103", "y = torch.log1p(-torch.sigmoid(x))"),
    ("NG103", "y = tf.math.log(1. - tf.sigmoid(x))"),
    ("NG103", "def f(x):\n    p = torch.sigmoid(x)\n    return torch.log(1 - p)"),
    # NG104 softplus by hand
    ("NG104", "y = torch.log1p(torch.exp(x))"),
    ("NG104", "y = x.exp().log1p()"),
    ("NG104", "y = torch.log(1 + torch.exp(x))"),
    ("NG104", "y = torch.log(torch.exp(x) + 1.0)"),
    ("NG104", "y = (1 + x.exp()).log()"),
    ("NG104", "y = tf.math.log1p(tf.exp(x))"),
    ("NG104", "y = tf.math.log(1. + tf.math.exp(-x))"),
    ("NG104", "def f(x):\n    e = x.exp()\n    return e.log1p()"),
    # NG105 logsumexp by hand
    ("NG105", "y = torch.log(torch.sum(torch.exp(x), dim=1))"),
    ("NG106", "std = torch.exp(0.5 * logvar)"),
    ("NG103", "a = torch.tanh(u)\nlp = torch.log(1 - a.pow(2)).sum(-1)"),
    ("NG103", "lp = torch.log(1 - torch.tanh(u) ** 2)"),
    ("NG401", "pos = torch.eq(idx, labels).float()\nt = pos / pos.sum(1, keepdim=True)"),
    ("NG501", "def loss_fn(params, state):\n    d = state.dot\n    return torch.where(d == 0.0, 0.0, 1.0 / d)"),
    ("NG701", "def f(scores, mask):\n    scores[~mask] = float('-inf')\n    return torch.softmax(scores, -1)"),
    ("NG201", "lp = F.log_softmax(z.masked_fill(~m, float('-inf')), -1)\nh = -(lp.exp() * lp).sum(-1)"),
    ("NG201", "def f(lp):\n    return -(lp.exp() * lp).sum(-1)"),
    ("NG104", "a = torch.where(x < 0, x, -x)\ny = torch.log(1 + torch.exp(-a))"),
    ("NG106", "kld = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())"),
    ("NG106", "s = self.log_std.exp()"),
    ("NG101", "y = torch.log(torch.softmax(x, 1).gather(1, t))"),
    ("NG101", "p = x.softmax(-1)\ny = p[torch.arange(n), t].log()"),
    ("NG201", "loss = F.kl_div(q.log(), p, reduction='batchmean')"),
    ("NG105", "y = torch.log(torch.exp(x).sum(-1))"),
    ("NG105", "y = x.exp().sum(-1).log()"),
    ("NG105", "y = tf.math.log(tf.reduce_sum(tf.exp(x), axis=1))"),
    ("NG105", "y = torch.log(torch.mean(torch.exp(x), 0))"),
    # NG201 hand-written cross-entropy / entropy
    ("NG201", "loss = -tf.reduce_sum(y_ * tf.log(y_conv))"),
    ("NG201", "loss = -(target * torch.log(probs)).sum(dim=1).mean()"),
    ("NG201", "loss = torch.mean(-torch.sum(labels * torch.log(pred), 1))"),
    ("NG201", "h = -(p * p.log()).sum(-1)"),
    ("NG201", "loss = -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()"),
    ("NG201", "loss = -torch.sum(target * pred.log(), dim=-1)"),
    ("NG201", "loss = F.nll_loss(torch.log(probs), y)"),
    # NG301 sqrt of a Gram expansion
    ("NG301", "d = torch.sqrt(diag_1 + diag_2 - (2 * gram_matrix))"),
    ("NG301", "d = torch.sqrt(sq[:, None] + sq[None, :] - 2 * x @ x.T)"),
    ("NG301", "d = (xx + yy - 2.0 * torch.mm(x, y.t())).sqrt()"),
    ("NG301", "d = tf.sqrt(na - 2 * tf.matmul(a, b, transpose_b=True) + nb)"),
    ("NG301", "d = torch.sqrt(torch.clamp(xx + yy - 2 * xy, min=0))"),
    ("NG301", "d = torch.sqrt(torch.addmm(sq, x, y.t(), beta=1, alpha=-2))"),
    ("NG301", "def f(x, y):\n    g = torch.mm(x, y.t())\n    d2 = a + b - 2 * g\n    return d2.sqrt()"),
    ("NG301", "d = (xx + yy - 2 * x @ y.T) ** 0.5"),
    # NG302 sqrt of sum of squares
    ("NG302", "n = torch.sqrt((x ** 2).sum(-1))"),
    ("NG302", "n = torch.sqrt(torch.sum(x * x, dim=1))"),
    ("NG302", "n = x.pow(2).sum(1).sqrt()"),
    ("NG302", "n = tf.sqrt(tf.reduce_sum(tf.square(x), axis=-1))"),
    ("NG302", "n = torch.sqrt(dx ** 2 + dy ** 2)"),
    ("NG302", "n = torch.sqrt(torch.mean(torch.square(a - b)))"),
    ("NG302", "n = torch.sum(x ** 2, dim=1) ** 0.5"),
    ("NG302", "u = x * torch.rsqrt((x * x).sum(-1, keepdim=True))"),
    # NG303 acos / asin of a cosine
    ("NG303", "a = torch.acos(F.cosine_similarity(u, v, dim=-1))"),
    ("NG303", "a = torch.acos((u * v).sum(-1))"),
    ("NG303", "a = torch.arccos(u @ v)"),
    ("NG303", "a = (u * v).sum(-1).acos()"),
    ("NG303", "a = torch.asin(torch.dot(u, v))"),
    ("NG303", "a = torch.acos(torch.clamp(cos, -1.0, 1.0))"),
    ("NG303", "a = tf.acos(tf.reduce_sum(u * v, axis=-1))"),
    ("NG303", "a = torch.acos(dot / (torch.norm(u) * torch.norm(v)))"),
    # NG304 fractional power at 0
    ("NG304", "y = torch.abs(x) ** 0.5"),
    ("NG304", "y = tf.pow(tf.nn.relu(x), 1 / 3)"),
    ("NG304", "s = torch.sqrt(x.var(dim=0))"),
    ("NG304", "y = torch.sqrt(torch.abs(x))"),
    ("NG304", "d = torch.norm(a - b, dim=-1) ** 0.5"),
    ("NG304", "def f(deg):\n    return deg.pow(-0.5)"),
    ("NG304", "w = torch.square(x) ** 0.25"),
    # NG401 division by a count
    ("NG401", "m = (x * mask).sum(1) / mask.sum(1)"),
    ("NG401", "m = tf.reduce_sum(embedded) / tf.reduce_sum(tf.not_equal(input, pad))"),
    ("NG401", "m = x.sum(1) / (labels != -100).sum()"),
    ("NG401", "m = s / attention_mask.float().sum(dim=1, keepdim=True)"),
    ("NG401", "def f(x, lengths):\n    return x.sum(1) / lengths"),
    ("NG401", "m = torch.sum(x, dim=1) / seq_lens[:, None]"),
    ("NG401", "m = torch.div(total, mask.sum())"),
    ("NG401", "def f(v, mask):\n    n = mask.sum(-1)\n    return v.sum(-1) / n"),
    ("NG401", "def f(v, mask):\n    out = v.sum(0)\n    out /= mask.sum()\n    return out"),
    ("NG401", "m = torch.sum(x[mask]) / len(x[mask])"),
    ("NG401", "m = tf.reduce_sum(e, 1) / tf.reduce_sum(tf.cast(tf.not_equal(ids, 0), tf.float32), 1)"),
    # NG501 where with a singular branch
    ("NG501", "y = torch.where(x > 0, torch.log(x), torch.zeros_like(x))"),
    ("NG501", "y = torch.where(x > 0, x.sqrt(), 0.0)"),
    ("NG501", "y = torch.where(n != 0, s / n, torch.zeros_like(s))"),
    ("NG501", "y = torch.where(x == 0, 1.0, torch.sin(x) / x)"),
    ("NG501", "y = tf.where(tf.not_equal(x, 0.), 1. / x, tf.zeros_like(x))"),
    ("NG501", "y = torch.where(x > 0, torch.pow(x, 0.5), 0)"),
    ("NG501", "y = torch.where(x.abs() < 1, torch.acos(x), 0.0)"),
    ("NG501", "y = torch.where(x > 20, x, torch.log1p(torch.exp(x)))"),
    ("NG501", "y = torch.log(x).masked_fill(x <= 0, 0.0)"),
    ("NG501", "y = x.reciprocal().masked_fill(x == 0, 0)"),
    ("NG501", "def f(x):\n    exp = x.exp()\n    return x.where(torch.isinf(exp), exp.log1p())"),
    ("NG501", ("def f(x):\n    x_ok = tf.not_equal(x, 0.)\n    f = lambda x: 1. / x\n"
               "    safe_f = tf.zeros_like\n    return tf.where(x_ok, f(x), safe_f(x))")),
    ("NG501", "def f(x):\n    y = torch.log(x)\n    return torch.where(x > 0, y, 0.0)"),
    ("NG501", "y = torch.where(x >= 0, x, 2 * (x.exp() - 1))"),
    ("NG501", "y = torch.where(~(x > 0), 0.0, torch.log(x))"),
    ("NG501", "y = torch.where(x.abs() < eps, 1.0, torch.sin(x) / x)"),
    ("NG501", "y = torch.where(torch.logical_not(x == 0), 1 / x, 0.0)"),
    ("NG501", "y = torch.where(x < 0, x, torch.log1p(torch.exp(-x)) + x)"),
    ("NG501", "y = torch.where(x > 20, x, torch.expm1(x).clamp_min(1e-12).log())"),
    ("NG501", "y = torch.where(torch.abs(c) < 1, torch.asin(c), 0.0)"),
    # NG601 log of a clamped probability
    ("NG601", "loss = -tf.reduce_sum(y_ * tf.log(tf.clip_by_value(y_conv, 1e-10, 1.0)))"),
    ("NG601", "l = torch.log(p.clamp(min=1e-8))"),
    ("NG601", "l = torch.log(torch.clamp(p, 1e-7, 1 - 1e-7))"),
    ("NG601", "l = p.clamp(min=eps).log()"),
    ("NG601", "l = torch.log(torch.clamp_min(p, 1e-12))"),
    ("NG601", "l = tf.math.log(tf.maximum(p, 1e-9))"),
    ("NG601", "def f(p):\n    q = p.clamp(min=1e-6)\n    return torch.log(q)"),
    ("NG601", "l = torch.log(torch.clamp(x, 1e-7, 1.0))"),
    ("NG601", "l = torch.log(torch.softmax(z, -1).clamp(min=1e-8))"),
    # NG602 clamped logits before softmax
    ("NG602", "p = tf.nn.softmax(logits=tf.clip_by_value(logits, -15.0, 15.0))"),
    ("NG602", "p = torch.softmax(torch.clamp(z, -15, 15), dim=-1)"),
    ("NG602", "p = F.log_softmax(z.clamp(-50, 50), -1)"),
    ("NG602", ("def f(logits):\n    safe_logits = tf.clip_by_value(logits, -15.0, 15.0)\n"
               "    return tf.nn.softmax(logits=safe_logits, name='Softmax')")),
    # NG701 softmax after a -inf mask
    ("NG701", "a = torch.softmax(s.masked_fill(~mask, float('-inf')), dim=-1)"),
    ("NG701", "def f(s, pad):\n    s = s.masked_fill(pad, -math.inf)\n    return F.softmax(s, dim=-1)"),
    ("NG701", "def f(s, keep):\n    s[~keep] = float('-inf')\n    return s.softmax(-1)"),
    ("NG701", "def f(s, m):\n    s.masked_fill_(m == 0, -np.inf)\n    return torch.softmax(s, -1)"),
    ("NG701", "a = torch.softmax(torch.where(keep, s, -torch.inf), -1)"),
    ("NG701", "a = tf.nn.softmax(tf.where(mask, scores, -np.inf))"),
    ("NG701", "a = torch.log_softmax(s.masked_fill(pad_mask, -float('inf')), -1)"),
    # NG801 std/var over dim 0
    ("NG801", "z = (x - x.mean(0)) / x.std(0)"),
    ("NG801", "v = torch.var(x, dim=0)"),
    ("NG801", "v = torch.std(x, 0, keepdim=True)"),
    ("NG801", "s, m = torch.std_mean(x, dim=(0,))"),
    ("NG801", "v = x.var(dim=0, unbiased=True)"),
    # NG901 softmax by hand
    ("NG901", "p = torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)"),
    ("NG901", "def f(x):\n    e = torch.exp(x)\n    return e / e.sum(-1, keepdim=True)"),
    ("NG901", "p = x.exp() / x.exp().sum(1, keepdim=True)"),
    ("NG901", "p = tf.exp(x) / tf.reduce_sum(tf.exp(x), axis=-1, keepdims=True)"),
    ("NG901", "def f(x):\n    e = x.exp()\n    e /= e.sum(-1, keepdim=True)\n    return e"),
]

NEGATIVE = [
    # NG101: log_softmax already, numpy/math logs, unrelated log
    ("NG101", "y = torch.log_softmax(x, 1)"),
    ("NG101", "y = np.log(softmax(x))"),
    ("NG101", "y = math.log(len(x))"),
    ("NG101", "self.log('loss', F.softmax(x, -1))"),
    ("NG101", "y = torch.log(torch.softmax(x, 1) + 1e-8)"),
    ("NG101", "def f(x):\n    p = F.softmax(x, -1)\n    p = p * mask\n    return torch.log(p)"),
    ("NG101", "y = log(softmax(x))"),  # bare names that are not imported
    # NG102/NG103
    ("NG102", "y = F.logsigmoid(x)"),
    ("NG102", "y = torch.log(torch.tanh(x))"),
    ("NG103", "y = torch.log(2 - torch.sigmoid(x))"),
    ("NG103", "y = torch.log1p(torch.sigmoid(x))"),
    # NG104: the stable forms
    ("NG104", "y = F.softplus(x)"),
    ("NG104", "y = torch.log1p(torch.exp(-torch.abs(x)))"),
    ("NG104", "y = torch.log1p(torch.exp(-x.abs())) + x.clamp(min=0)"),
    ("NG104", "y = torch.log(2 + torch.exp(x))"),
    ("NG104", "y = torch.log1p(torch.exp(x - x.max()))"),
    ("NG501", "y = np.where(x > 0, np.sqrt(x), 0)"),   # NumPy has no autograd: no gradient to poison
    ("NG104", "y = torch.log1p(x)"),
    ("NG104", "def f(x):\n    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))"),
    # NG105: stabilized
    ("NG105", "y = m + torch.log(torch.sum(torch.exp(x - m), dim=1))"),
    ("NG106", "std = torch.exp(0.5 * logvar.clamp(-30, 20))"),
    ("NG103", "a = torch.tanh(u)\nlp = torch.log(1 - a.pow(2) + 1e-6)"),
    ("NG103", "lp = 2 * (math.log(2) - u - F.softplus(-2 * u))"),
    ("NG401", "idx = idx.view(-1, 1)\nidx_all = torch.cat([idx.t(), queue], dim=1)\n"
              "pos = torch.eq(idx, idx_all).float()\nt = pos / pos.sum(1, keepdim=True)"),
    ("NG401", "n_frames = fbank.size(1)\nr = abs(target - n_frames) / n_frames"),
    ("NG401", "def f(loss, mask):\n    return tf.cond(tf.reduce_any(mask), lambda: tf.reduce_sum(loss * mask)"
              " / tf.reduce_sum(mask), lambda: 0.0)"),
    ("NG501", "def update_fn(updates, state, params=None):\n    d = state.dot\n"
              "    return torch.where(d == 0.0, 0.0, 1.0 / d), state"),
    ("NG701", "logits[:, :eot] = float('-inf')\np = torch.softmax(logits, -1)"),
    ("NG701", "logits[:, self.tokenizer.no_timestamps] = -np.inf\np = logits.softmax(-1)"),
    ("NG701", "m = torch.ones(v, dtype=torch.bool)\nm[allowed] = False\nlogits[:, m] = -np.inf\np = logits.softmax(-1)"),
    ("NG104", "pos = x >= 0\na = torch.where(pos, x, -x)\ny = torch.log(1 + torch.exp(-a))"),
    ("NG106", "logvar = torch.clamp(logvar, max=10)\nstd = torch.exp(0.5 * logvar)"),
    ("NG106", "std = torch.exp(-torch.nn.functional.softplus(raw))"),
    ("NG106", "log_sigmas = p_mean + p_std * torch.randn(n)\nsigmas = torch.exp(log_sigmas)"),
    ("NG106", "def kl(self, logstd=None):\n    logstd = self.logstd if logstd is None else logstd.clamp(max=10)\n"
              "    return logstd.exp()"),
    ("NG601", "tiny = torch.finfo(p.dtype).tiny\ny = torch.log(p.clamp_min(tiny))"),
    ("NG201", "lp = F.log_softmax(z, -1)\nh = -(lp.exp() * lp).sum(-1)"),
    ("NG105", "y = torch.log(torch.exp(x - x.max(-1, keepdim=True).values).sum(-1))"),
    ("NG105", "y = torch.logsumexp(x, 1)"),
    # NG201: guarded, covered elsewhere, not a cross-entropy
    ("NG201", "loss = -(y * torch.log(p + 1e-8)).sum()"),
    ("NG201", "loss = -(y * F.log_softmax(z, -1)).sum()"),
    ("NG201", "loss = (0.5 * torch.log(var)).sum()"),
    ("NG201", "lp = torch.sum(order * diag.log(), dim=-1)"),
    ("NG201", "loss = -(y * torch.log(torch.softmax(z, -1))).sum()"),
    ("NG201", "loss = -(y * torch.log(p.clamp(min=1e-8))).sum()"),
    ("NG201", "loss = -(y * torch.log(p)).detach()"),
    ("NG201", "loss = F.nll_loss(F.log_softmax(z, -1), y)"),
    ("NG201", "loss = F.nll_loss(torch.log(probs + 1e-8), y)"),
    # NG301: a real distance op, positive epsilon, not a Gram term
    ("NG301", "d = torch.cdist(x, y)"),
    ("NG301", "d = torch.sqrt(xx + yy - 2 * xy + 1e-8)"),
    ("NG301", "d = torch.sqrt(torch.clamp(xx + yy - 2 * xy, min=1e-12))"),
    ("NG301", "r = torch.floor(-b - torch.sqrt(b * b - 2 * xs))"),
    ("NG301", "d = math.sqrt(a * a + b * b - 2 * a * b)"),
    # NG302: torch norms, eps, no_grad, python floats
    ("NG302", "n = torch.linalg.vector_norm(x, dim=-1)"),
    ("NG302", "n = torch.sqrt((x ** 2).sum(-1) + 1e-12)"),
    ("NG302", "n = torch.sqrt(x.pow(2).sum(1).clamp(min=1e-12))"),
    ("NG302", "with torch.no_grad():\n    n = torch.sqrt((x ** 2).sum(-1))"),
    ("NG302", "@torch.no_grad()\ndef f(x):\n    return x.pow(2).sum().sqrt()"),
    ("NG302", "d = (a[i] ** 2 + b[i] ** 2) ** 0.5"),
    ("NG302", "n = torch.sqrt(x ** 2)"),  # one square: not a norm (NG304 territory)
    ("NG302", "def grid(x):\n    x = x.detach().cpu()\n    return torch.sqrt((x ** 2).sum(3))"),
    ("NG302", "n = torch.sqrt((w.data ** 2).sum(1))"),
    # NG303: clamped strictly inside, not a cosine
    ("NG303", "a = torch.acos(torch.clamp(cos, -1 + 1e-7, 1 - 1e-7))"),
    ("NG303", "a = torch.acos(cos.clamp(-0.9999, 0.9999))"),
    ("NG303", "a = torch.acos(x)"),
    ("NG303", "a = math.acos(c)"),
    # NG304: guarded, integer powers, python floats
    ("NG304", "y = (torch.abs(x) + 1e-6) ** 0.5"),
    ("NG304", "y = torch.abs(x) ** 2"),
    ("NG304", "y = torch.abs(x) ** 1.5"),
    ("NG304", "y = abs(v) ** 0.5"),
    ("NG304", "s = torch.sqrt(x.var(dim=0) + eps)"),
    ("NG304", "y = torch.rsqrt(torch.abs(x))"),
    ("NG304", "def f(deg):\n    d = deg.pow(-0.5)\n    d[d == float('inf')] = 0\n    return d"),
    # NG401: guarded denominators, unrelated divisions
    ("NG401", "m = (x * mask).sum(1) / mask.sum(1).clamp(min=1)"),
    ("NG401", "m = (x * mask).sum(1) / (mask.sum(1) + 1e-8)"),
    ("NG401", "m = x.sum() / max(len(x), 1)"),
    ("NG401", "m = x.sum(1) / torch.max(mask.sum(1), torch.tensor(1.0))"),
    ("NG401", "m = total / len(items)"),
    ("NG401", "m = x / x.sum()"),
    ("NG401", "m = x / weights.sum()"),
    ("NG401", "def f(x, lengths):\n    return x / lengths"),
    ("NG401", "def f(x, mask):\n    n = mask.sum()\n    if n == 0:\n        return x.sum() * 0\n    return x.sum() / n"),
    ("NG401", "def f(x, mask):\n    n = mask.sum(1)\n    n[n == 0] = 1\n    return x.sum(1) / n"),
    ("NG401", "m = torch.where(n > 0, s / n.clamp(min=1), 0.0)"),
    ("NG401", "m = tf.math.divide_no_nan(s, tf.reduce_sum(mask))"),
    ("NG401", "m = torch.nan_to_num(x.sum(1) / mask.sum(1))"),
    ("NG401", "m = torch.div(a, mask.sum(), rounding_mode='floor')"),
    # NG501: double where, unrelated or non-constant conditions, no_grad
    ("NG501", "safe = torch.where(x > 0, x, torch.ones_like(x))\ny = torch.where(x > 0, torch.log(safe), 0.0)"),
    ("NG501", "y = torch.where(x > 0, torch.log(torch.where(x > 0, x, 1.0)), 0.0)"),
    ("NG501", "y = torch.where(mask, torch.log(p), 0.0)"),
    ("NG501", "y = torch.where(loss < beta, 0.5 * loss ** 2 / beta, loss - 0.5 * beta)"),
    ("NG501", "y = torch.where(x > 0, x * 2, x / 2)"),
    ("NG501", "y = torch.where(x > 0, torch.log(x + 1e-6), 0.0)"),
    ("NG501", "y = torch.where(x > 0, torch.log(x.clamp(min=1e-6)), 0.0)"),
    ("NG501", "y = torch.where(torch.isnan(g), torch.zeros_like(g), g)"),
    ("NG501", "with torch.no_grad():\n    y = torch.where(x > 0, torch.log(x), 0.0)"),
    ("NG501", "y = torch.where(x > 0, torch.exp(-x.abs()), 0.0)"),
    ("NG501", "y = torch.where(mask, torch.exp(x), 0.0)"),
    ("NG501", "y = torch.where(accept, torch.acos(f), x)"),
    # ...the singular point is not in the discarded region:
    ("NG501", "y = torch.where(x != 0, torch.exp(x), 0)"),
    ("NG501", "y = torch.where(x > 20, torch.exp(x), 0.0)"),
    ("NG501", "y = torch.where(x < 1, torch.log(x), 0.0)"),
    ("NG501", "y = torch.where(x > 0, 0.0, torch.log(x))"),
    ("NG501", "y = torch.where(c.abs() > 1, 0.0, torch.acos(c))"),
    ("NG501", "y = torch.where(x > 0, x, torch.log1p(torch.exp(-x)))"),
    ("NG501", "y = torch.where(torch.isnan(d), 0.0, torch.log2(d))"),
    ("NG501", "y = np.where(x > 0, np.log(x), 0)"),
    ("NG501", "idx = torch.where(x > 0)"),
    ("NG501", "y = torch.where(target > 0, target * torch.log(target), 0.0)"),
    ("NG501", ("class F(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n"
               "        x, = ctx.saved_tensors\n        return torch.where(x > 0, g / x, 0.0)")),
    # NG601: large bound, not a log, division by a clamp
    ("NG601", "l = torch.log(x.clamp(min=1.0))"),
    ("NG601", "l = torch.log(duration.clamp(min=1e-5))"),  # not a probability
    ("NG601", "l = torch.log(target_probs.clamp(min=1e-8))"),  # targets get no gradient
    ("NG601", "l = torch.log(p + 1e-8)"),
    ("NG601", "u = x / x.norm(dim=-1, keepdim=True).clamp(min=1e-12)"),
    ("NG601", "with torch.no_grad():\n    l = torch.log(p.clamp(min=1e-8))"),
    # NG602: softmax of a plain or scaled tensor
    ("NG602", "p = torch.softmax(z / temperature, -1)"),
    ("NG602", "p = torch.softmax(z, -1).clamp(min=1e-6)"),
    # NG701: finite fills, causal masks
    ("NG701", "a = torch.softmax(s.masked_fill(~mask, -1e9), dim=-1)"),
    ("NG701", "a = torch.softmax(s.masked_fill(~mask, torch.finfo(s.dtype).min), dim=-1)"),
    ("NG701", ("def f(s, n):\n    causal = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)\n"
               "    s = s.masked_fill(causal, float('-inf'))\n    return s.softmax(-1)")),
    ("NG701", "a = torch.softmax(s.masked_fill(causal_mask, float('-inf')), -1)"),
    ("NG701", "a = torch.softmax(s, -1).masked_fill(~mask, 0.0)"),
    ("NG701", "a = torch.nan_to_num(torch.softmax(s.masked_fill(~m, float('-inf')), -1))"),
    # NG801: population statistics, other dims, tf
    ("NG801", "s = x.std(0, unbiased=False)"),
    ("NG801", "s = torch.std(x, dim=0, correction=0)"),
    ("NG801", "s = x.std(-1)"),
    ("NG801", "s = x.std()"),
    ("NG801", "s = tf.math.reduce_std(x, axis=0)"),
    ("NG801", "s = np.std(x, 0)"),
    ("NG801", "s = x.var(0, False)"),
    # NG901: stabilised softmax, different exponents, torch.softmax
    ("NG901", "p = torch.exp(x - x.max(-1, keepdim=True).values) / torch.exp(x - x.max(-1, keepdim=True).values).sum(-1)"),
    ("NG901", "def f(x):\n    e = torch.exp(x - x.amax(-1, keepdim=True))\n    return e / e.sum(-1, keepdim=True)"),
    ("NG901", "p = torch.exp(x) / torch.exp(y).sum()"),
    ("NG901", "p = torch.exp(log_probs) / torch.exp(log_probs).sum()"),
    ("NG901", "p = torch.softmax(x, -1)"),
]


@pytest.mark.parametrize("code,body", POSITIVE, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POSITIVE)])
def test_rule_fires(codes, code, body):
    assert code in codes(body), f"{code} should fire on:\n{body}"


@pytest.mark.parametrize("code,body", NEGATIVE, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEGATIVE)])
def test_rule_stays_silent(codes, code, body):
    assert code not in codes(body), f"{code} should not fire on:\n{body}"


def test_every_rule_has_positive_and_negative_cases():
    from nanguard.lint.rules import RULES
    covered_pos = {c for c, _ in POSITIVE}
    covered_neg = {c for c, _ in NEGATIVE}
    for code in RULES:
        if code == "NG001":
            continue
        assert code in covered_pos, f"no positive case for {code}"
    assert covered_neg >= {c for c in covered_pos if c not in ("NG102", "NG103")} | {"NG102", "NG103"}


def test_clean_idiomatic_training_code_has_no_findings(codes):
    """A realistic, correct training step must produce no finding at all."""
    body = '''
    class Head(torch.nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.proj = torch.nn.Linear(d, n)
            self.eps = 1e-6

        def forward(self, x, mask, target):
            logits = self.proj(x)
            logp = F.log_softmax(logits, dim=-1)
            nll = -(target * logp).sum(-1)
            denom = mask.sum().clamp(min=1)
            loss = (nll * mask).sum() / denom
            feats = F.normalize(x, dim=-1)
            sim = feats @ feats.T
            dist = torch.cdist(x, x)
            norm = torch.linalg.vector_norm(x, dim=-1)
            std = x.std(-1, keepdim=True)
            z = (x - x.mean(-1, keepdim=True)) / (std + self.eps)
            probs = torch.sigmoid(logits)
            bce = F.binary_cross_entropy_with_logits(logits, target)
            lse = torch.logsumexp(logits, -1)
            soft = F.softplus(logits)
            return loss + bce + lse.sum() + soft.sum() + sim.sum() + dist.sum() + norm.sum() + z.sum()
    '''
    assert codes(body) == []


def test_suggested_nanguard_ops_exist():
    """Every `nanguard.<op>` a rule recommends is part of the public API (no dangling advice)."""
    import pathlib
    import re

    import nanguard
    from nanguard.core.hazards import HAZARDS
    from nanguard.lint.rules import RULES

    texts = [r.explanation + r.fix_hint + r.summary for r in RULES.values()]
    texts += [p.read_text() for p in pathlib.Path(nanguard.__file__).parent.joinpath("lint", "rules").glob("*.py")]
    # The words of every finding come from the hazard catalogue: its advice is checked too.
    texts += [h.why_text() + h.fix_text() + "".join(h.evidence.values()) for h in HAZARDS.values()]
    named = {m for t in texts for m in re.findall(r"nanguard\.([a-z_]+)\(", t)}
    assert named, "rules should recommend nanguard ops"
    missing = sorted(n for n in named if n not in nanguard.__all__)
    assert missing == []
