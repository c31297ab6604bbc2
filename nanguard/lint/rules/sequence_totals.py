"""Totals over a whole batch of the frames of its sequences (NG401: possible, not certain).

`loss.sum() / x_mask.sum()` in a TTS model divides by the number of frames in the whole batch:
0 only when every sequence of the batch is empty, which no data loader of such a model yields
(an empty utterance fails earlier, in the encoder). A per-row count (`x_mask.sum(-1)`: one
empty or fully padded row is enough) stays certain, and so does a total of a mask that marks
labels or loss terms (`(labels != -100).sum()`, `loss_mask.sum()`, a plain `mask.sum()`): a
batch whose labels are all ignored (a prompt truncated before its answer) is ordinary data.

A mask counts as a sequence's frames when its name or key says so (`x_mask`, `y_mask`, `mel_mask`,
`text_mask`, `dur_mask`, `src_mask`, `frame_mask`, an `attention_mask` of the inputs' tokens or
patches, `kwargs.get("attention_mask")`, NATSpeech's `nonpadding` and `word_nonpadding`...) or
when it is built from lengths in view (`sequence_mask(lengths)`, `get_mask_from_lengths(x,
lens)`, `~make_pad_mask(lens)`, or written out: `arange(T)[None, :] < lengths[:, None]`); a total
of lengths (`input_lens.sum()`) is the same number.

A total of an input's tokens that are not padding (`tf.reduce_sum(tf.not_equal(input, pad))`)
stays certain: seed 003's mean pooling of one input, which can be all padding.

Two kinds of code total masks the data fills whatever they are called:
* pretraining, where every token of a packed batch is a label: a module named for it
  (Megatron's `pretrain_gpt.py`, MAE's `main_pretrain.py`, VideoMAE's
  `engine_for_pretraining.py`), one whose masks come from Megatron's
  `get_ltor_masks_and_position_ids`, or a function named for it (`pt_loss`, `get_lmpt_loss`,
  `pretrain_step`). The same spelling in fine-tuning code, where a truncated prompt can leave a
  batch without one label, stays certain;
* masked-patch pretraining (MAE and its copies): in a module that masks patches at random
  (a `random_masking` function, a `mask_ratio` parameter), `(loss * mask).sum() / mask.sum()`
  counts the patches hidden, `int(L * mask_ratio)` of every sample: 0 only for a ratio of 0.

The same holds one level up, for a total over what an evaluation collected from every batch
(`gt = np.concatenate(gt_list)`, then `(gt != ignore).sum()`: SoftGroup's accuracy): 0 only for
a dataset without one valid label.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import in_a_loop
from nanguard.lint.names import OpCall
from nanguard.lint.module_kind import path_parts
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.shapes import python_accumulator
from nanguard.lint.syntax import callee_name, const_value, last_identifier

# The frames or tokens of an input sequence, as speech, TTS and translation code names them.
_FRAMES = (r"(x|y|z|mel|mels|spec|text|txt|dur|durs|frame|frames|feat|feats|audio|speech|wav|src|"
           r"phone|phones|phn|phoneme|enc|dec|seq|input|attention|attn)")
_FRAME_MASK = re.compile(
    rf"^{_FRAMES}_?masks?$|^masks?_{_FRAMES}$"  # `x_mask`, `seq_mask`; Bailando's `mask_seq`
    # NATSpeech's spelling (FastSpeech 2, DiffSinger, diff-svc): `nonpadding = (mel2ph > 0).float()`
    r"|^(\w+_)?non_?pad(ding)?$", re.IGNORECASE)
# Helpers that turn lengths into a mask of the valid frames (or, `make_pad_mask`, of the padding).
_FROM_LENGTHS = re.compile(
    r"^(get_)?(sequence|seq|len|lens|length|lengths)_?(to_)?mask$|^(get_)?mask_from_(len|lens|length|lengths)$|"
    r"^make_(non_)?pad_mask$", re.IGNORECASE)
_LENGTHS = re.compile(r"(^|_)(len|lens|length|lengths)$", re.IGNORECASE)
# Where every token of a batch is a label: pretraining (module docstring).
_PRETRAINING_FUNCTION = re.compile(r"(^|_)(pt|lmpt|pretrain|pretraining)(_|$)", re.IGNORECASE)
_PRETRAINING_MASKS = frozenset({"get_ltor_masks_and_position_ids"})
_PRETRAINING_MODULE = re.compile(r"(^|_)pre_?train(ing)?(_|\.py$)", re.IGNORECASE)
# Masked-patch pretraining: a random masking of a fixed share of the patches (module docstring).
_RANDOM_MASKING = re.compile(r"^_?random_(patch_)?masking$", re.IGNORECASE)
_MASK_RATIO = frozenset({"mask_ratio", "masking_ratio", "mask_rate"})


def _flat(e: ast.expr | None) -> bool:
    """`m.view(-1)`, `m.reshape(-1)`, `m.flatten()`: one dimension left."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)):
        return False
    if e.func.attr == "flatten":
        return not e.args and not e.keywords
    return e.func.attr in ("view", "reshape") and len(e.args) == 1 and const_value(e.args[0]) == -1


def _whole_total(oc: OpCall) -> bool:
    """`m.sum()`, `torch.sum(m)`, `np.sum(m)`, `tf.reduce_sum(m)`, `torch.count_nonzero(m)`: no
    dimension, one number; so is a sum of a flattened mask over its one dimension
    (`m.view(-1).sum(-1)`)."""
    if oc.op not in ("sum", "count_nonzero"):
        return False
    dim = oc.operand(1, "dim", "axis")
    return dim is None or (const_value(dim) in (0, -1) and _flat(oc.input))


def _keyed(e: ast.expr) -> str | None:
    """The string key of `batch["x_mask"]` or `kwargs.get("attention_mask", None)`."""
    key = None
    if isinstance(e, ast.Subscript):
        key = e.slice
    elif isinstance(e, ast.Call) and callee_name(e.func) == "get" and e.args:
        key = e.args[0]
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _frames(ctx: Analysis, mask: ast.expr, depth: int = 4) -> bool:
    e = strip_wrappers(ctx, mask)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        e = strip_wrappers(ctx, e.operand)  # `~make_pad_mask(lens)`
    if isinstance(e, ast.Call) and _FROM_LENGTHS.search(callee_name(e.func)):
        return True
    if _positions_below_lengths(e):
        return True
    ident = last_identifier(e) or _keyed(e)
    if ident is not None and _FRAME_MASK.search(ident):
        return True
    if depth > 0 and name_key(e) is not None:
        # the one value, or (`mask = mask.reshape(b, -1)` after `mask = kwargs.get("attention_mask")`)
        # the last one before this use
        value = ctx.value_of(e) or ctx.last_value(e, skip_none=True)
        return value is not None and _frames(ctx, value, depth - 1)
    return False


def _positions_below_lengths(e: ast.expr) -> bool:
    """`arange(T)[None, :] < lengths[:, None]` (or `lengths > arange(T)`): `sequence_mask` written
    out, the valid frames. Its complement (`>=`: the padding) is not one."""
    if not (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Lt, ast.Gt))):
        return False
    low, high = (e.left, e.comparators[0]) if isinstance(e.ops[0], ast.Lt) else (e.comparators[0], e.left)
    while isinstance(low, ast.Subscript):
        low = low.value  # `arange(T)[None, :]`
    while isinstance(high, ast.Subscript) and not _keyed(high):
        high = high.value  # `lengths[:, None]`
    ident = last_identifier(high) or _keyed(high)
    return isinstance(low, ast.Call) and callee_name(low.func) == "arange" \
        and ident is not None and bool(_LENGTHS.search(ident))


_JOINS = frozenset({"concatenate", "cat", "concat", "vstack", "hstack"})


def _collected(ctx: Analysis, expr: ast.expr) -> bool:
    """`np.concatenate(gt_list, axis=0)`, `torch.cat(outputs)`: one array joined from a list of
    batches (a name or a comprehension, not a tuple of two tensors), directly or through a name."""
    e = strip_wrappers(ctx, expr)
    if name_key(e) is not None:
        value = ctx.value_of(e)
        e = strip_wrappers(ctx, value) if value is not None else e
    return isinstance(e, ast.Call) and callee_name(e.func) in _JOINS and len(e.args) >= 1 \
        and isinstance(e.args[0], (ast.Name, ast.ListComp, ast.GeneratorExp))


def _over_collected(ctx: Analysis, mask: ast.expr, depth: int = 2) -> bool:
    e = strip_wrappers(ctx, mask)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Invert, ast.Not)):
        e = strip_wrappers(ctx, e.operand)
    if isinstance(e, ast.Compare):
        return any(_collected(ctx, part) for part in [e.left, *e.comparators])
    if depth > 0 and name_key(e) is not None:
        value = ctx.value_of(e)
        return value is not None and _over_collected(ctx, value, depth - 1)
    return False


def _module_facts(ctx: Analysis) -> tuple[bool, bool]:
    """(masks from Megatron's pretraining helper, a random patch masking) for the whole module."""
    facts = ctx.memo.get("sequence_totals")
    if facts is None:
        megatron = patches = False
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and callee_name(node.func) in _PRETRAINING_MASKS:
                megatron = True
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                patches = patches or bool(_RANDOM_MASKING.search(node.name)) or any(
                    a.arg in _MASK_RATIO for a in args.posonlyargs + args.args + args.kwonlyargs)
        facts = ctx.memo["sequence_totals"] = (megatron, patches)
    return facts


def _in_pretraining(ctx: Analysis) -> bool:
    if _PRETRAINING_MODULE.search(path_parts(ctx.path)[-1]) or _module_facts(ctx)[0]:
        return True
    s = ctx.scope
    while s is not None:
        if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _PRETRAINING_FUNCTION.search(s.node.name):
            return True
        s = s.parent
    return False


def total_filled_by_data(ctx: Analysis, oc: OpCall, mask: ast.expr) -> str | None:
    """Why `oc`, a count of `mask`, is a whole-batch total that the data fills (the module
    docstring's cases), worded for the finding; None for any other count."""
    if not _whole_total(oc):
        return None
    if _frames(ctx, mask):  # `/ x_mask.sum()`
        return "totals the frames of the whole batch, 0 only when every sequence is empty"
    if _over_collected(ctx, mask):  # `(np.concatenate(gt_list) != ignore).sum()`
        return "totals a mask over every batch collected, 0 only for a dataset with nothing selected"
    if _in_pretraining(ctx):  # Megatron's `loss_mask.sum()` in `pretrain_gpt.py`
        return "totals a pretraining batch's mask, 0 only when no token of the batch is a label"
    if _module_facts(ctx)[1]:  # MAE's `(loss * mask).sum() / mask.sum()`
        return "totals the patches a random masking hides, 0 only for a masking ratio of 0"
    return None


def total_of_lengths(ctx: Analysis, expr: ast.expr) -> bool:
    """`num_frames = inputs["input_lens"].sum()`: the frames of the whole batch, counted by lengths."""
    value = ctx.value_of(expr) if name_key(expr) is not None else expr
    oc = ctx.op(strip_wrappers(ctx, value)) if value is not None else None
    if oc is None or not _whole_total(oc) or oc.input is None:
        return False
    lengths = strip_wrappers(ctx, oc.input)
    if isinstance(lengths, ast.Subscript) and isinstance(lengths.slice, ast.Constant) \
            and isinstance(lengths.slice.value, str):
        return bool(_LENGTHS.search(lengths.slice.value))  # `batch["input_lens"]`
    ident = last_identifier(lengths)
    return ident is not None and bool(_LENGTHS.search(ident))


def total_over_batches(ctx: Analysis, expr: ast.expr) -> bool:
    """`ntokens = 0`, then in a loop over batches `ntokens += toks.item()`: a Python total of
    what every batch counted (MLX's LoRA `evaluate`), 0 only when no batch counted anything, as
    for a total over every batch collected (module docstring)."""
    if not python_accumulator(ctx, expr):
        return False
    scope, values = ctx.lookup(expr.id)  # type: ignore[attr-defined]
    grown = scope.augmented.get(expr.id, []) if scope is not None else []  # type: ignore[attr-defined]
    start = [v for v in values if v is not None]
    return bool(grown) and len(start) == 1 and const_value(start[0]) == 0 and all(
        isinstance(g.op, ast.Add) and _item_of(g.value) and in_a_loop(ctx, scope.node, g.lineno)  # type: ignore[union-attr]
        for g in grown)


def _item_of(e: ast.expr) -> bool:
    """`toks.item()`, `float(n.item())`, `int(mask.sum())`: one number read off a tensor."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("int", "float") \
            and len(e.args) == 1:
        e = e.args[0]
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("item", "sum")
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "item" and not e.args
