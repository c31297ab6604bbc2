"""Healthy models in structural mode: no finding on a training step of transformers GPT-2,
BERT, Llama and T5 (random init, padding masks, eager and sdpa attention), nn.Transformer-
Encoder with a padding mask, a ResNet with batch norm, and a nanoGPT-style model."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from nanguard.torch.auditor import audit

transformers = pytest.importorskip("transformers")


def _quiet(step) -> None:
    result = audit(step, witness=False)
    assert result.findings == [], str(result)
    assert result.stopped_at == "backward"


def _hf(model, labels=None):
    torch.manual_seed(0)
    ids = torch.randint(1, 100, (2, 8))
    att = torch.ones(2, 8, dtype=torch.long)
    att[1, 5:] = 0

    def step():
        out = model(input_ids=ids, attention_mask=att, labels=ids if labels is None else labels)
        out.loss.backward()
    return step


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5"])
def test_transformers_models_are_quiet(name: str, attn: str) -> None:
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, attn_implementation=attn)
        step = _hf(transformers.GPT2LMHeadModel(cfg))
    elif name == "bert":
        cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                      intermediate_size=128, vocab_size=100, attn_implementation=attn)
        step = _hf(transformers.BertForSequenceClassification(cfg), labels=torch.tensor([0, 1]))
    elif name == "llama":
        cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                       num_key_value_heads=2, intermediate_size=128, vocab_size=100,
                                       attn_implementation=attn)
        step = _hf(transformers.LlamaForCausalLM(cfg))
    else:
        cfg = transformers.T5Config(num_layers=2, d_model=64, num_heads=4, d_ff=128, vocab_size=100, d_kv=16,
                                    decoder_start_token_id=0, pad_token_id=0, attn_implementation=attn)
        step = _hf(transformers.T5ForConditionalGeneration(cfg))
    _quiet(step)


def test_transformer_encoder_with_padding_is_quiet() -> None:
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2)

    def step():
        x = torch.randn(2, 8, 32)
        pad = torch.zeros(2, 8, dtype=torch.bool)
        pad[1, 6:] = True
        enc(x, src_key_padding_mask=pad).pow(2).mean().backward()
    _quiet(step)


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


def test_resnet_is_quiet() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), _Block(16), _Block(16),
                        nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, 10))

    def step():
        x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
        F.cross_entropy(net(x), y, label_smoothing=0.1).backward()
    _quiet(step)


class _NanoAttention(nn.Module):
    """nanoGPT's CausalSelfAttention, manual path: masked_fill(-inf) of a causal buffer, softmax."""

    def __init__(self, d: int, heads: int, block: int) -> None:
        super().__init__()
        self.c_attn, self.c_proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.attn_dropout = nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


def test_nanogpt_style_model_is_quiet() -> None:
    torch.manual_seed(0)
    wte, wpe = nn.Embedding(50, 32), nn.Embedding(16, 32)
    blocks = nn.ModuleList([_NanoAttention(32, 4, 16) for _ in range(2)])
    ln, head = nn.LayerNorm(32), nn.Linear(32, 50, bias=False)

    def step():
        idx, targets = torch.randint(0, 50, (2, 12)), torch.randint(0, 50, (2, 12))
        x = wte(idx) + wpe(torch.arange(12))
        for b in blocks:
            x = x + b(F.gelu(ln(x)))
        logits = head(ln(x))
        F.cross_entropy(logits.view(-1, 50), targets.view(-1), ignore_index=-1).backward()
    _quiet(step)
