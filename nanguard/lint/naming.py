"""What names say: counts that can be 0, masks, probabilities and targets.

Variable names are evidence the linter weighs (``lengths``, ``mask``, ``probs``); these
predicates read them as `_`-separated tokens and look one assignment deep.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.syntax import _bounded_walk, last_identifier

_COUNT_WORDS = frozenset({
    "len", "lens", "length", "lengths", "count", "counts", "cnt", "cnts", "deg", "degree", "degrees",
    "nnz", "ntokens", "ntok", "seqlen", "seqlens",
})


_COUNT_PREFIXED = re.compile(r"^(num|n|number|count)_?([a-z]+_)?(valid|tokens?|nonzero|non_zero|nonpad|non_pad|"
                             r"unmasked|active|present|observed|real|elements|items|members|neighbou?rs|words|"
                             r"frames|labels|targets|positives?|negatives|objects|boxes|instances|matches|"
                             r"hits|selected|kept)$")


def is_strong_count_name(expr: ast.AST) -> bool:
    """`num_label_tokens`, `n_valid`, `num_positives`: a count of selected things, 0 when none is."""
    ident = last_identifier(expr)
    return ident is not None and bool(_COUNT_PREFIXED.match(ident.lower()))


# Sizes fixed by configuration, not counted from data: `hop_length`, `win_length`, `max_len`,
# `kernel_size`... they are never 0 at run time.
_CONFIG_WORDS = frozenset({
    "hop", "win", "window", "fft", "kernel", "stride", "frame", "chunk", "block", "patch", "segment", "max",
    "min", "sample", "sampling", "context", "embed", "hidden", "head", "heads", "dim", "batch", "seg", "filter",
    "filt", "pad", "step", "steps", "total", "full", "vocab", "feature", "features", "channel", "channels",
    "grid", "image", "img", "bucket", "buckets", "cache", "model", "beam", "warmup", "decay", "epoch", "epochs",
})


def is_count_name(expr: ast.AST) -> bool:
    """`lengths`, `seq_lens`, `self.counts`, `num_valid`, `deg`: names for a count that can be 0.
    Not configured sizes (`hop_length`, `max_len`, `self.kernel_size`) nor CONSTANTS."""
    ident = last_identifier(expr)
    if ident is None or (ident.isupper() and len(ident) > 1):
        return False
    low = ident.lower()
    if any(word in _CONFIG_WORDS for word in low.split("_")):
        return False
    if _COUNT_PREFIXED.match(low):
        return True
    return any(word in _COUNT_WORDS for word in low.split("_"))


# Words of a name that say "a mask" (`attention_mask`, `srcMask`, `probs_masked`: a value with a
# mask applied is zero where it is, so it sums to 0 when the mask selects nothing) ...
_MASK_WORDS = frozenset({"mask", "masks", "masked"})
# ... and words that say it unless the last word names a quantity (`is_valid`, `valid_tgt`,
# `keep`, `non_pad`; not `valid_alignment`, `keep_prob`, `valid_loss`: values kept by a mask).
_KEPT_WORDS = frozenset({"valid", "invalid", "nonpad", "notpad", "keep"})
_KEPT_PAIRS = frozenset({("non", "pad"), ("not", "pad")})
_CAMEL = re.compile(r"([a-z])([A-Z])")  # `srcMask` -> `src_Mask`
_QUANTITY_WORDS = frozenset({
    "loss", "losses", "logit", "logits", "score", "scores", "prob", "probs", "alignment", "alignments",
    "weight", "weights", "pred", "preds", "prediction", "predictions", "feat", "feats", "feature",
    "features", "value", "values", "output", "outputs", "emb", "embedding", "embeddings", "attn",
    "ratio", "rate", "fraction", "count", "counts", "sum", "total",
})


def _mask_name(ident: str) -> bool:
    """`mask`, `attention_mask`, `srcMask`, `padmask`, `masked_weight`, `is_valid`, `valid_tgt`,
    `keep`, `non_pad`; not `keepdim`, `validation`, `valid_alignment`, `keep_prob`."""
    words = [w for w in re.split(r"[_\d]+", _CAMEL.sub(r"\1_\2", ident).lower()) if w]
    if any(w in _MASK_WORDS or w.endswith(("mask", "masks", "masked")) for w in words):
        return True
    if not words or words[-1] in _QUANTITY_WORDS:
        return False
    return any(w in _KEPT_WORDS for w in words) or any(pair in _KEPT_PAIRS for pair in zip(words, words[1:]))


def is_mask_like(ctx: Analysis, expr: ast.expr, depth: int = 2) -> bool:
    """A boolean/0-1 tensor: a comparison, `~m`, `m1 & m2`, `m1 * m2`, `tf.not_equal(...)`, a name like `mask`."""
    e = strip_wrappers(ctx, expr)
    if isinstance(e, ast.Compare):
        return True
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        return is_mask_like(ctx, e.operand, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.BitAnd, ast.BitOr)):
        return is_mask_like(ctx, e.left, depth) or is_mask_like(ctx, e.right, depth)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        return is_mask_like(ctx, e.left, depth) and is_mask_like(ctx, e.right, depth)  # `(y == 1) * attention_mask`
    oc = ctx.op(e)
    if oc is not None and oc.op == "compare":
        return True
    ident = last_identifier(e)
    if ident is not None:
        if _mask_name(ident):
            return True
        if depth > 0:
            value = ctx.value_of(e)
            if value is not None:
                return is_mask_like(ctx, value, depth - 1)
    return False


PROBABILITY_WORDS = frozenset({
    "p", "q", "pi", "py", "px", "pz", "qz", "prob", "probs", "proba", "probas", "probability",
    "probabilities", "conv", "softmax", "sigmoid", "attn", "attention", "posterior", "likelihood",
    "yhat", "hat",
})


def named_like(ctx: Analysis, expr: ast.expr, words: frozenset, y_prefix: bool = False) -> bool:
    """Does a variable in `expr` carry one of `words` as a `_`-separated token (`probs`,
    `p_hat`, `y_conv`, `self.attn`)? With `y_prefix`, names starting with `y` count too."""
    for node in _bounded_walk(expr, 40):
        ident = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if ident is None or ident in ctx.imports.aliases:
            continue
        low = ident.lower()
        if y_prefix and low.startswith("y"):
            return True
        if any(t in words for t in re.split(r"[_\d]+", low) if t):
            return True
    return False
