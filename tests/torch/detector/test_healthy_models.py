"""Healthy training steps of real models are quiet, in both checking modes.

Third-party models built from configs with random weights (transformers' GPT-2, BERT, Llama,
BART, ViT, T5) and torch's own attention, decoder, activation checkpointing and bfloat16
autocast: each takes two training steps with padding masks (the -inf / finfo.min fills that
come out finite), and the detector must say nothing. A report here is a false alarm.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import nanguard

MODES = [pytest.param(False, id="default"), pytest.param(True, id="exhaustive")]


def _hf_model(name: str, attention: str):
    transformers = pytest.importorskip("transformers")
    tiny = dict(vocab_size=100)
    if name == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, n_positions=64, bos_token_id=0, eos_token_id=0, **tiny))
    elif name == "bert":
        model = transformers.BertForSequenceClassification(transformers.BertConfig(
            num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
            max_position_embeddings=64, **tiny))
    elif name == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=32,
            intermediate_size=64, max_position_embeddings=64, **tiny))
    elif name == "bart":
        model = transformers.BartForConditionalGeneration(transformers.BartConfig(
            encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, **tiny))
    elif name == "t5":
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(
            num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, decoder_start_token_id=0, **tiny))
    else:
        model = transformers.ViTForImageClassification(transformers.ViTConfig(
            num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
            image_size=16, patch_size=4, num_labels=3))
    model.set_attn_implementation(attention)
    return model


def _hf_steps(name: str, model) -> list:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(1, 100, (3, 12))
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 8:] = 0
    mask[2, 3:] = 0          # mostly padding
    losses = []
    for _ in range(2):
        if name == "vit":
            out = model(pixel_values=torch.randn(3, 3, 16, 16), labels=torch.tensor([0, 1, 2]))
        elif name == "bert":
            out = model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 1, 0]))
        else:
            labels = ids.masked_fill(mask == 0, -100)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.detach())
    return losses


T5_EXHAUSTIVE = pytest.param(
    "t5", True, marks=pytest.mark.xfail(strict=True, reason=(
        "known false alarm: T5's relative-position buckets take log(0) = -inf of integer "
        "positions, cast it to long and discard it with where(); the exhaustive check "
        "judges every op where it runs")), id="t5-exhaustive")


@pytest.mark.slow
@pytest.mark.parametrize("name,exhaustive", [
    pytest.param(n, e, id=f"{n}-{'exhaustive' if e else 'default'}")
    for n in ("gpt2", "bert", "llama", "bart", "vit", "t5") for e in (False, True) if (n, e) != ("t5", True)
] + [T5_EXHAUSTIVE])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_transformers_training_step_is_quiet(name, exhaustive, attention):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _hf_model(name, attention)
    with nanguard.detect(exhaustive=exhaustive, mode="record", modules={"model": model}) as d:
        losses = _hf_steps(name, model)
    assert d.report is None, d.report
    assert all(bool(torch.isfinite(loss)) for loss in losses)


def _attention_with_causal_and_padding_masks():
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8)
    pad = torch.tensor([[False] * 4, [False, False, True, True]])
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
    out, _ = mha(x, x, x, key_padding_mask=pad, attn_mask=causal)
    out.sum().backward()
    return out


def _decoder_with_masks():
    model = torch.nn.Transformer(16, 2, 1, 1, 32, batch_first=True)
    src, tgt = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    out = model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(4), tgt_is_causal=True,
                src_key_padding_mask=torch.tensor([[False] * 5, [False] * 2 + [True] * 3]))
    out.sum().backward()
    return out


def _checkpointed():
    inner, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
    x = torch.randn(4, 8, requires_grad=True)
    outs = []
    for reentrant in (False, True):
        h = checkpoint(lambda v: torch.tanh(inner(v)), x, use_reentrant=reentrant)
        out = head(h).sum()
        out.backward()
        outs.append(out)
    return torch.stack(outs)


def _bfloat16_autocast_encoder():
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    x = torch.randn(3, 5, 16)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = encoder(x, src_key_padding_mask=pad)
    out.float().sum().backward()
    return out


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("program", [_attention_with_causal_and_padding_masks, _decoder_with_masks,
                                     _checkpointed, _bfloat16_autocast_encoder],
                         ids=lambda f: f.__name__.strip("_"))
def test_torch_models_are_quiet(program, exhaustive):
    torch.manual_seed(0)
    with nanguard.detect(exhaustive=exhaustive, mode="record") as d:
        out = program()
    assert d.report is None, d.report
    assert bool(torch.isfinite(out.float()).all())
