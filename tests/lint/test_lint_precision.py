"""Precision: the harmless shapes of real code are not findings, and findings say how sure they are.

Each negative is a shape that was reported on real trees (nanoGPT/minGPT attention, top-k
sampling, Gaussian kernels, timm's pooling, audio `hop_length`, diffusion buffers) and is not
a risk in context. CERTAIN findings (NaN/Inf for some input the code accepts) are the command
line's default set; POSSIBLE ones (NaN depending on data) need `--confidence all` or a code
named in `--select`.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from nanguard.lint import CERTAIN, POSSIBLE, lint_source
from nanguard.lint.cli import main

HEADER = ("import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
          "import tensorflow as tf\nimport jax\nimport jax.numpy as jnp\n")


def _codes(body: str, confidence: str = "all") -> list[str]:
    return [f.code for f in lint_source(HEADER + textwrap.dedent(body), confidence=confidence)]


NEGATIVES = [
    ("NG701", """\
        class CausalSelfAttention(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(n, n)).view(1, 1, n, n))

            def forward(self, q, k, T):
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
                return F.softmax(att, dim=-1)
    """),
    ("NG701", """\
        def sample(logits, top_k):
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float('Inf')
            return F.softmax(logits, dim=-1)
    """),
    ("NG701", """\
        def top_p(logits, sorted_indices_to_remove):
            logits = logits.masked_fill(sorted_indices_to_remove, float("-inf"))
            return logits.softmax(-1)
    """),
    ("NG701", """\
        def attend(scores, mask):
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            return scores.softmax(-1)
    """),
    ("NG701", """\
        def attend(scores, mask):
            p = torch.softmax(scores, -1)
            scores[~mask] = float("-inf")
            return p, scores
    """),
    ("NG701", """\
        def attend(scores, mask, use_mask):
            if use_mask:
                scores = scores.masked_fill(~mask, float("-inf"))
                return scores
            else:
                return torch.softmax(scores, -1)
    """),
    ("NG901", """\
        def gaussian(x, sigma):
            k = torch.exp(-0.5 * (x / sigma) ** 2)
            return k / k.sum()
    """),
    ("NG901", """\
        def gaussian(x, s):
            e = torch.exp(-(x ** 2) / (2 * s ** 2))
            return e / torch.sum(e)
    """),
    ("NG901", """\
        def kernel(row):
            row_max = jnp.max(row, axis=0)
            numerator = jnp.exp((row - row_max).astype(jnp.float32))
            return numerator / jnp.sum(numerator, axis=0)
    """),
    ("NG105", """\
        def lse_pool(x):
            x_max = F.adaptive_max_pool2d(x, 1)
            x = x - x_max
            return x.exp().mean((2, 3), keepdim=True).log() + x_max
    """),
    ("NG401", "frames = x.sum(-1) / hop_length\n"),
    ("NG401", "frames = x.sum(-1) / self.hop_length\n"),
    ("NG401", "frames = x.sum(-1) / HOP_LENGTH\n"),
    ("NG401", "m = x.sum(-1) / max_len\n"),
    ("NG401", "m = x.sum(-1) / 16\n"),
    ("NG303", """\
        def angle(a, b, eps=1e-7):
            c = F.cosine_similarity(a, b)
            c = c.clamp(-1 + eps, 1 - eps)
            return torch.acos(c)
    """),
    ("NG303", """\
        def angle(a, b):
            t = F.cosine_similarity(a, b)
            x = t.clamp(-0.999999, 0.999999)
            return torch.acos(x)
    """),
    ("NG601", """\
        class Diffusion(nn.Module):
            def __init__(self, betas, alphas_cumprod, alphas_cumprod_prev):
                super().__init__()
                posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)
                self.register_buffer("log_var", torch.log(posterior_variance.clamp(min=1e-20)))
    """),
    ("NG302", "n = torch.sqrt((x ** 2).sum(-1)).item()\n"),
    ("NG302", "n = torch.sqrt((x ** 2).sum(-1)).detach()\n"),
    ("NG302", "n = tf.stop_gradient(tf.sqrt(tf.reduce_sum(x ** 2, -1)))\n"),
    ("NG302", "n = jax.lax.stop_gradient(jnp.sqrt(jnp.sum(x ** 2)))\n"),
    ("NG302", "n = tf.sqrt(tf.reduce_sum(tf.stop_gradient(x) ** 2, -1))\n"),
    ("NG501", "y = torch.where(x > 0, torch.log(x), torch.zeros_like(x)).detach()\n"),
    # torch.distributions' InverseGamma.mean: inf on purpose where the mean does not exist.
    ("NG501", "m = torch.where(c > 1, rate / (c - 1), torch.inf)\n"),
    ("NG501", "m = torch.where(c < 0, lower - scale / c, inf)\n"),
    # transformers' SAM2 stability score: counts of a comparison carry no gradient
    ("NG501", """\
        def stability(mask_logits, delta):
            area_i = torch.sum(mask_logits > delta, dim=-1).float()
            area_u = torch.sum(mask_logits > -delta, dim=-1).float()
            return torch.where(area_u > 0, area_i / area_u, 1.0)
    """),
    # ESMFold's random rotations: a random draw is no leaf of the autograd graph
    ("NG501", """\
        def rotations(n):
            q = torch.randn((n, 4))
            scale = torch.sqrt((q * q).sum(dim=1))
            return torch.where(q[:, 0] < 0, -scale, scale)
    """),
    ("NG501", "s = torch.sum(x.detach(), -1)\ny = torch.where(s > 0, torch.log(s), 0.0)\n"),
    # diffusers' mel_to_hz: the threshold is a number computed from constants, and the exp
    # is kept exactly where it could overflow
    ("NG501", """\
        def mel_to_hz(mel):
            linear_step = 200.0 / 3
            log_step = math.log(6.4) / 27.0
            min_log_mel = 1000.0 / linear_step
            return torch.where(mel >= min_log_mel, 1000.0 * torch.exp(log_step * (mel - min_log_mel)),
                               linear_step * mel)
    """),
    # transformers' xIELU: the exp's argument is bounded above by min(x, eps)
    ("NG501", "y = torch.where(x > 0, a * x * x, torch.expm1(torch.min(x, self.eps)) - a * x)\n"),
    ("NG302", "def rmse(pred, y):\n    return torch.sqrt(F.mse_loss(pred, y) + 1e-8)\n"),
    ("NG303", "def geodesic(m, eps=1e-6):\n    cos = (torch.diagonal(m, dim1=1, dim2=2).sum(-1) - 1) / 2\n"
              "    return torch.acos(cos.clamp(-1 + eps, 1 - eps))\n"),
    # diffusers' slerp: the branch that takes the arccos has |dot| <= 0.9995
    ("NG303", """\
        def slerp(t, v0, v1, DOT_THRESHOLD=0.9995):
            dot = torch.sum(v0 * v1 / (torch.norm(v0) * torch.norm(v1)))
            if torch.abs(dot) > DOT_THRESHOLD:
                return (1 - t) * v0 + t * v1
            else:
                theta_0 = torch.acos(dot)
                return theta_0
    """),
    # taming-transformers' minGPT: a tril mask, patched, then registered as a buffer
    ("NG701", """\
        class Attn(nn.Module):
            def __init__(self, n, n_unmasked):
                super().__init__()
                mask = torch.tril(torch.ones(n, n))
                mask[:n_unmasked, :n_unmasked] = 1
                self.register_buffer("mask", mask.view(1, 1, n, n))
            def forward(self, att, T):
                att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float('-inf'))
                return F.softmax(att, dim=-1)
    """),
    # a constant by convention, and a ratio handed to a NaN cleaner (trax's metrics)
    ("NG401", "def scale(i):\n    return i.sum() * 255.0 / Data.N_PART_LABELS\n"),
    ("NG401", "def seg(self, x):\n    num_frames = self.cfg.DATA.NUM_FRAMES\n    return x.sum() / num_frames\n"),
    ("NG401", "def recall(pred, t, k):\n    n_k_targets = (t == k).sum()\n"
              "    return _non_nan(((pred == k) & (t == k)).sum() / n_k_targets)\n"),
    # a helper of this file that returns log_softmax is not a softmax
    ("NG101", "def logp_of(x):\n    return F.log_softmax(x, -1)\ny = logp_of(z).exp().log()\n"),
    # an optax-style schedule: a step counter and number hyperparameters, nothing differentiated
    ("NG501", """\
        def schedule(count, init_value=1.0, warmup_steps=100, timescale=1000):
            return jnp.where(count < warmup_steps, init_value * count / warmup_steps,
                             init_value / jnp.sqrt((count - warmup_steps) / timescale))
    """),
    # fairseq's OOV rate: Python ints grown by len(): ZeroDivisionError, never a NaN
    ("NG401", """\
        def oov(texts):
            n_tokens, n_oov = 0, 0
            for t in texts:
                n_tokens += len(t)
                n_oov += 1
            return n_oov / n_tokens
    """),
    # fairseq's MMPT pooling: a block of ones is concatenated into every row of the mask
    ("NG401", """\
        def pool(h, cmasks, vmasks, b):
            m = torch.cat([cmasks[:, 1:2], vmasks, torch.ones((b, 1), dtype=torch.bool)], dim=1)
            return (h * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)
    """),
    # simclr's LARS: an optimizer's apply_gradients runs on gradients, outside any tape
    ("NG501", """\
        class LARSOptimizer(tf.train.Optimizer):
            def apply_gradients(self, grads_and_vars):
                for grad, param in grads_and_vars:
                    w_norm, g_norm = tf.norm(param), tf.norm(grad)
                    ratio = tf.where(tf.greater(g_norm, 0), w_norm / g_norm, 1.0)
    """),
]


@pytest.mark.parametrize("code,body", NEGATIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(NEGATIVES)])
def test_harmless_shapes_are_not_findings(code, body):
    assert code not in _codes(body), f"{code} should not fire on:\n{body}"


# The same shapes with the risk kept: the negatives above are not silent by accident.
POSITIVES = [
    ("NG701", """\
        def attend(scores, pad_mask):
            scores = scores.masked_fill(~pad_mask, float("-inf"))
            return torch.softmax(scores, -1)
    """),
    ("NG701", """\
        def attend(scores, mask, use_mask):
            if use_mask:
                scores = scores.masked_fill(~mask, float("-inf"))
            return torch.softmax(scores, -1)
    """),
    ("NG901", "e = torch.exp(0.5 * (x / s) ** 2)\np = e / e.sum()\n"),
    ("NG105", "def lse(x):\n    x = x * 2\n    return x.exp().sum(-1).log()\n"),
    ("NG401", "m = (x * mask).sum(-1) / mask.sum(-1)\n"),
    ("NG401", "m = x.sum(-1) / lengths\n"),
    ("NG401", "def recall(pred, t, k):\n    n_k_targets = (t == k).sum()\n"
              "    return log_it(((pred == k) & (t == k)).sum() / n_k_targets)\n"),
    ("NG401", "def pool(h, m, b):\n    pad_mask = torch.cat([m, torch.zeros((b, 1), dtype=torch.bool)], dim=1)\n"
              "    return (h * pad_mask).sum(1) / pad_mask.sum(1)\n"),
    ("NG401", "def rate(xs):\n    n_tokens = 0\n    for x in xs:\n        n_tokens += x.sum()\n    return xs[0].sum() / n_tokens\n"),
    # Clamped to exactly [-1, 1]: finite value, but the gradient is inf at ±1 (parallel vectors).
    ("NG303", "def angle(a, b):\n    c = F.cosine_similarity(a, b)\n    c = c.clamp(-1, 1)\n"
              "    return torch.acos(c)\n"),
    ("NG302", "n = torch.sqrt((x ** 2).sum(-1))\n"),
    ("NG302", "n = tf.sqrt(tf.reduce_sum(x ** 2, -1))\n"),
    ("NG501", "y = torch.where(x > 0, torch.log(x), torch.zeros_like(x))\n"),
    # a count in the denominator, but the numerator has a gradient: 0/0 reaches x.grad
    ("NG501", "n = (m > 0).sum(-1)\ny = torch.where(n > 0, x.sum(-1) / n, 0.0)\n"),
    ("NG501", "v = torch.randn(3).requires_grad_()\ny = torch.where(v > 0, torch.log(v), 0.0)\n"),
    ("NG501", "v = torch.randn(3, requires_grad=True)\ny = torch.where(v > 0, torch.log(v), 0.0)\n"),
    ("NG501", "w = nn.Parameter(torch.randn(3))\ny = torch.where(w > 0, torch.log(w), 0.0)\n"),
    ("NG501", "m = torch.min(x, 1).values\ny = torch.where(m < 80, torch.exp(m), 0.0)\n"),
    ("NG501", "def f(x, scale=2.0):\n    return jnp.where(x > 0, scale / jnp.sqrt(x), 0.0)\n"),
    ("NG501", "cut = 15.0 * 2\ny = torch.where(mel <= cut, torch.exp(mel), mel)\n"),
    ("NG501", "lo = 10.0 / 100\ny = torch.where(x > lo, torch.log(x), x)\n"),
    # a module of this file whose forward returns a softmax, then a log of its picked entries
    ("NG101", """\
        class Policy(nn.Module):
            def forward(self, s):
                return torch.softmax(self.net(s), dim=1)
        policy = Policy()
        def loss(s, a):
            probs = policy(s)
            return -torch.log(probs.gather(1, a[:, None])).mean()
    """),
    ("NG101", "def probs_of(x):\n    return F.softmax(x, -1)\ny = torch.log(probs_of(z))\n"),
    # a geodesic rotation loss: the cosine of the identity rotation is exactly 1
    ("NG303", "def geodesic(m):\n    cos = (torch.diagonal(m, dim1=1, dim2=2).sum(-1) - 1) / 2\n"
              "    return torch.acos(cos)\n"),
    # RMSE: 0 for an exact prediction, an infinite gradient there
    ("NG302", "criterion = nn.MSELoss()\ndef step(pred, y):\n    return torch.sqrt(criterion(pred, y))\n"),
    ("NG302", "def rmse(pred, y):\n    return F.mse_loss(pred, y).sqrt()\n"),
    # transformers' GLM-5/Kimi gates: the seed story itself
    ("NG501", "y = torch.where(g > 20.0, g, torch.log(1.0 + torch.exp(g)))\n"),
]


@pytest.mark.parametrize("code,body", POSITIVES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(POSITIVES)])
def test_the_risky_variants_are_still_found(code, body):
    assert code in _codes(body), f"{code} should fire on:\n{body}"


CONFIDENCE = [
    ("y = torch.log(torch.softmax(x, 1))\n", "NG101", CERTAIN),
    ("y = torch.where(x > 0, torch.log(x), torch.zeros_like(x))\n", "NG501", CERTAIN),
    ("a = torch.acos(F.linear(F.normalize(x), F.normalize(w)))\n", "NG303", CERTAIN),
    ("a = torch.acos(cos_sim)\n", "NG303", CERTAIN),                      # a cosine is ±1 for parallel vectors
    ("a = torch.acos(costs)\n", "NG303", POSSIBLE),                       # `cost` is not a cosine
    ("r = tf.sqrt(tf.nn.relu(x))\n", "NG304", CERTAIN),                  # 0 on a half-line, TF's grad multiplies
    ("r = torch.sqrt(x.var(0))\n", "NG304", POSSIBLE),                    # 0 for constant data only
    ("m = (x * mask).sum(-1) / mask.sum(-1)\n", "NG401", CERTAIN),        # a mask can be all False
    ("d = torch.sqrt(((a - b) ** 2).sum(-1))\n", "NG302", CERTAIN),       # identical points
    ("d = torch.sqrt((z ** 2).sum(-1))\n", "NG302", POSSIBLE),             # is z ever 0? the data's
    ("d = torch.sqrt((p - t) ** 2 + c ** 2)\n", "NG302", POSSIBLE),        # pseudo-Huber: c > 0
    ("sm = torch.nn.Softmax(dim=1)\ny = torch.log(sm(x))\n", "NG101", CERTAIN),  # a module instance
    ("s = scores.masked_fill(~pad_mask, float('-inf')).softmax(-1)\n", "NG701", CERTAIN),  # a padded row
    # fairseq's reduce_metrics: a builtin sum over what other code logged
    ("def reduce(logs, loss):\n    ntokens = sum(log.get('ntokens', 0) for log in logs)\n"
     "    return loss.sum() / ntokens\n", "NG401", POSSIBLE),
    ("def reduce(logs, loss):\n    ntokens = utils.item(sum(log.get('ntokens', 0) for log in logs))\n"
     "    return loss.sum() / ntokens\n", "NG401", POSSIBLE),
    ("s = x.std(0)\n", "NG801", POSSIBLE),                                # a module-level value: the data's rows
    ("def f(x):\n    return x.std(0)\n", "NG801", CERTAIN),                # the caller may pass one row
    ("def f(x):\n    x = x.flatten(1)\n    return x.std(0)\n", "NG801", POSSIBLE),
    ("def f(xs):\n    def ensemble(x):\n        return x.std(0)\n    return ensemble(xs)\n", "NG801", POSSIBLE),
    ("p = torch.log(torch.clamp(q, 1e-10, 1.0))\n", "NG601", CERTAIN),    # the seed's clip to [eps, 1]
    ("p = torch.log(q.clamp(min=1e-10))\n", "NG601", POSSIBLE),           # the guard real fixes use
    ("p = torch.log(q.clamp(1e-7, 1 - 1e-7))\n", "NG601", POSSIBLE),      # Keras's clip to [eps, 1 - eps]
    ("y = torch.softmax(torch.clamp(z, -15, 15), -1)\n", "NG602", CERTAIN),
    ("y = torch.softmax(z.clamp(max=50), -1)\n", "NG602", POSSIBLE),
    ("d = torch.sqrt(dx ** 2 + dy ** 2)\n", "NG302", CERTAIN),            # named differences
    ("r = torch.norm(a - b, dim=-1) ** 0.5\n", "NG304", CERTAIN),         # identical points
    ("r = mask.sum(-1) ** -0.5\n", "NG304", CERTAIN),                     # an empty mask
    # timm's LSE pooling: max-subtracted, then scaled by a temperature that is positive by intent
    ("x_max = x.amax(-1, keepdim=True)\ne = torch.exp(self.r * (x - x_max))\n"
     "y = x_max + torch.log(e.mean(-1)) / self.r\n", "NG105", POSSIBLE),
    ("y = torch.log(torch.exp(r * x).sum(-1))\n", "NG105", CERTAIN),
]


@pytest.mark.parametrize("body,code,confidence", CONFIDENCE)
def test_each_finding_carries_its_confidence(body, code, confidence):
    [f] = [f for f in lint_source(HEADER + body) if f.code == code]
    assert f.confidence == confidence
    assert (code in _codes(body, confidence="certain")) == (confidence == CERTAIN)


@pytest.mark.parametrize("path,body", [
    ("torch/testing/_internal/common_nn.py", "ref = lambda i: i.sigmoid().log()\n"),
    ("tests/test_loss.py", "y = torch.log(torch.softmax(x, 1))\n"),
    ("lib/loss_test.py", "y = torch.log(torch.softmax(x, 1))\n"),
    ("conftest.py", "y = torch.log(torch.softmax(x, 1))\n"),
])
def test_findings_in_test_files_are_possible_not_certain(path, body):
    # A test file's formula runs on the test's own inputs: not the default set (README, "Lint").
    [f] = lint_source(HEADER + body, path=path)
    assert f.confidence == POSSIBLE
    assert lint_source(HEADER + body, path=path, confidence="certain") == []


METRIC_BODY = "def compute_ctr(ctr_num, ctr_denom):\n    return torch.where(ctr_denom <= 0.0, 0.0, ctr_num / ctr_denom)\n"
RATE_BODY = "def click_rate(clicks, mask):\n    return clicks.sum() / mask.sum()\n"


@pytest.mark.parametrize("path", ["torchrec/metrics/ctr.py", "lib/metrics.py", "kornia/metric/epe.py",
                                  "blackjax/diagnostics.py", "sampler/diagnostics/psis.py"])
def test_gradient_findings_in_metric_modules_are_possible(path):
    # An evaluation number is rarely differentiated: its gradient hazards are lowered (README, "Lint").
    [f] = lint_source(HEADER + METRIC_BODY, path=path)
    assert f.code == "NG501" and f.confidence == POSSIBLE
    assert lint_source(HEADER + METRIC_BODY, path=path, confidence="certain") == []
    # ... elsewhere the same function is a certain finding,
    assert [f.code for f in lint_source(HEADER + METRIC_BODY, path="lib/ranking.py", confidence="certain")] == ["NG501"]
    # ... and a NaN in the number itself stays certain in a metric module.
    assert [f.code for f in lint_source(HEADER + RATE_BODY, path=path, confidence="certain")] == ["NG401"]


COLLISION_BODY = ("def collision_force(delta_pos):\n"
                  "    dist = jnp.sqrt(jnp.sum(jnp.square(delta_pos)))\n    return dist\n")
REWARD_BODY = "def reward(found, mask):\n    return found.sum() / mask.sum()\n"


@pytest.mark.parametrize("path", ["jaxmarl/environments/mpe/simple.py", "myrl/envs/pendulum.py", "game/env.py"])
def test_gradient_findings_in_environment_modules_are_possible(path):
    # An RL environment's step is sampled, not differentiated: its gradient hazards are lowered (README).
    [f] = lint_source(HEADER + COLLISION_BODY, path=path)
    assert f.code == "NG302" and f.confidence == POSSIBLE
    assert lint_source(HEADER + COLLISION_BODY, path=path, confidence="certain") == []
    # ... a NaN in the reward itself stays certain.
    assert [f.code for f in lint_source(HEADER + REWARD_BODY, path=path, confidence="certain")] == ["NG401"]


ENV_CLASS = """\
class WaterWorld(VectorizedTask):
    def reset(self, key):
        return self._reset_fn(key)

    def step(self, state, action):
        return self._step_fn(state, action)
"""
NOT_AN_ENV = ENV_CLASS.replace("action)", "batch)").replace("action", "batch")


def test_gradient_findings_beside_an_environment_class_are_possible():
    # EvoJAX's task files: a class with reset() and step(state, action) is an RL environment.
    [f] = lint_source(HEADER + COLLISION_BODY + ENV_CLASS, path="evojax/task/waterworld.py")
    assert f.code == "NG302" and f.confidence == POSSIBLE
    # ... a class whose step takes no action (a trainer's step) is not.
    [f] = lint_source(HEADER + COLLISION_BODY + NOT_AN_ENV, path="lib/trainer.py")
    assert f.confidence == CERTAIN


@pytest.mark.parametrize("path", ["blackjax/optimizers/lbfgs.py", "pkg/optim/adam.py", "lib/optimizer.py"])
def test_gradient_findings_in_optimizer_modules_are_possible(path):
    # An optimizer runs on gradients outside the tape: its gradient hazards are lowered (README).
    [f] = lint_source(HEADER + COLLISION_BODY, path=path)
    assert f.code == "NG302" and f.confidence == POSSIBLE
    assert [f.code for f in lint_source(HEADER + REWARD_BODY, path=path, confidence="certain")] == ["NG401"]


@pytest.mark.parametrize("path", ["mmdet/models/task_modules/assigners/atss_assigner.py",
                                  "det/dynamic_soft_label_assigner.py", "pkg/assigner.py"])
def test_gradient_findings_in_label_assignment_modules_are_possible(path):
    # A detector's label assignment builds training targets without gradient (README).
    [f] = lint_source(HEADER + COLLISION_BODY, path=path)
    assert f.code == "NG302" and f.confidence == POSSIBLE
    assert [f.code for f in lint_source(HEADER + REWARD_BODY, path=path, confidence="certain")] == ["NG401"]


@pytest.mark.parametrize("path", ["physicsnemo/diffusion/samplers/edm_stochastic_heun.py", "k_diffusion/sampling.py",
                                  "pkg/ddim_sampler.py"])
def test_gradient_findings_in_sampler_modules_are_possible(path):
    # A sampler draws from a trained model step by step: its gradient hazards are lowered (README).
    [f] = lint_source(HEADER + COLLISION_BODY, path=path)
    assert f.code == "NG302" and f.confidence == POSSIBLE
    assert [f.code for f in lint_source(HEADER + REWARD_BODY, path=path, confidence="certain")] == ["NG401"]


@pytest.mark.parametrize("path", ["pytracking/analysis/extract_results.py", "yolact/eval.py", "pkg/evaluation/iou.py",
                                  "ltr/data/processing.py", "monai/data/box_utils.py", "pkg/datasets/transforms.py"])
def test_gradient_findings_in_evaluation_and_data_modules_are_possible(path):
    # Result analysis, evaluation scripts and data pipelines run on what a model or a dataset
    # already gave: their gradient hazards are lowered, a NaN in what they compute stays (README).
    [f] = lint_source(HEADER + COLLISION_BODY, path=path)
    assert f.code == "NG302" and f.confidence == POSSIBLE
    assert [f.code for f in lint_source(HEADER + REWARD_BODY, path=path, confidence="certain")] == ["NG401"]


@pytest.mark.parametrize("path", ["lib/physics.py", "miniconda3/envs/py311/lib/python3.11/site-packages/pkg/dist.py",
                                  "pkg/environment_utils.py", "pkg/optimization.py", "pkg/assignment_loss.py",
                                  "pkg/dataloader.py", "pkg/evaluator_head.py", "pkg/database/geometry.py",
                                  "pkg/sampling_loss.py", "flamingo/perceiver_resampler.py"])
def test_a_conda_environment_or_a_similar_name_is_not_an_rl_environment(path):
    [f] = lint_source(HEADER + COLLISION_BODY, path=path, confidence="certain")
    assert (f.code, f.confidence) == ("NG302", CERTAIN)


@pytest.mark.parametrize("fn", ["naive_attention", "reference_loss", "oracle_softmax", "test_helper", "ref_loss"])
def test_a_function_name_lowers_nothing_outside_test_files(fn):
    # Production code named `naive_attention` is linted like any other function.
    body = f"def {fn}(x):\n    return torch.log(torch.softmax(x, 1))\n"
    [f] = lint_source(HEADER + body, path="lib/attention.py", confidence="certain")
    assert (f.code, f.confidence) == ("NG101", CERTAIN)


def test_lint_source_rejects_an_unknown_confidence():
    with pytest.raises(ValueError, match="confidence must be"):
        lint_source("x = 1\n", confidence="maybe")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    # a certain finding, and a possible one (the max-subtracted exponent scaled by a temperature
    # whose sign the code does not show)
    (tmp_path / "m.py").write_text(HEADER + "a = torch.log(torch.softmax(x, 1))\n"
                                   "b = torch.log(torch.exp(r * (x - x.amax(-1, keepdim=True))).sum(-1))\n")
    return tmp_path


def _json(capsys, *argv):
    status = main(["--isolated", "--format", "json", *argv])
    return status, [(i["code"], i["confidence"]) for i in json.loads(capsys.readouterr().out)]


def test_command_line_default_set_is_the_certain_findings(project, capsys):
    assert _json(capsys, "m.py") == (1, [("NG101", CERTAIN)])


def test_confidence_all_and_naming_a_code_add_the_possible_findings(project, capsys):
    both = [("NG101", CERTAIN), ("NG105", POSSIBLE)]
    assert _json(capsys, "--confidence", "all", "m.py") == (1, both)
    assert _json(capsys, "--extend-select", "NG105", "m.py") == (1, both)
    assert _json(capsys, "--select", "NG105", "m.py") == (1, [("NG105", POSSIBLE)])
    assert _json(capsys, "--select", "NG1", "m.py") == (1, [("NG101", CERTAIN)])  # a prefix does not opt in


def test_a_test_file_is_not_parsed_when_only_certain_findings_are_asked_for():
    # Its findings would all be possible: the default set skips the file (README), so even a
    # syntax error there shows only with --confidence all or NG001 selected.
    broken = "def f(:\n"
    assert lint_source(broken, path="tests/test_x.py", confidence="certain") == []
    assert [f.code for f in lint_source(broken, path="tests/test_x.py", confidence="all")] == ["NG001"]
    assert [f.code for f in lint_source(broken, path="model.py", confidence="certain")] == ["NG001"]
