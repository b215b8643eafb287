#!/usr/bin/env python3
"""The LlamaDecoder benchmark matrix's train step in PyTorch, timed per step (the peer of
`tlaloc bench step --model llama --preset P`).

The model is HF transformers' LlamaForCausalLM written from its equations (modeling_llama.py):
embedding, pre-norm decoder layers (RMSNorm computed in f32, self-attention with rotate-half RoPE
on q and k, grouped kv heads repeated to the query heads (repeat_kv), causal softmax(q k^T /
sqrt(head_dim)) v, o_proj; RMSNorm, SwiGLU MLP down(silu(gate(x)) * up(x))), final RMSNorm,
untied lm_head; no biases. Presets as tlaloc/recipes/llama_presets.h. Next-token cross-entropy
over batch windows of context tokens (random ids), AdamW(lr 1e-3, weight_decay 0.01) stepped
every step (foreach on CPU: the faster of torch 1.13's two CPU implementations here).
With --lora, PEFT-style LoRA (r 8, alpha 16 on q_proj and v_proj, the base frozen; AdamW over the
adapters only), the peer of `tlaloc bench step --model llama --lora`. Prints a final line
  RESULT torch <device> preset=P params=N trained=M median_ms=.. min_ms=.. max_ms=.. steps=N peak_rss_mib=..
"""
import argparse
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_step import lm_step, result_line, time_steps

# name: layers, hidden, heads, kv_heads, intermediate, context, batch (vocab 8000, head_dim
# hidden / heads, RMSNorm eps 1e-5, rope_theta 10000)
PRESETS = {
    "tiny": (2, 128, 4, 2, 384, 64, 8),
    "small": (4, 256, 4, 2, 768, 256, 8),
    "medium": (8, 512, 8, 4, 1408, 512, 4),
}
VOCAB, EPS, THETA = 8000, 1e-5, 10000.0


class RMSNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
        return self.weight * x.to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.d, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(heads * self.d, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)  # repeat_kv
        v = v.repeat_interleave(rep, dim=1)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d) + mask
        p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        a = torch.matmul(p, v).transpose(1, 2).reshape(b, t, self.heads * self.d)
        return self.o_proj(a)


class MLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, inter):
        super().__init__()
        self.self_attn = Attention(hidden, heads, kv_heads)
        self.mlp = MLP(hidden, inter)
        self.input_layernorm = RMSNorm(hidden)
        self.post_attention_layernorm = RMSNorm(hidden)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, inter):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, hidden)
        self.layers = nn.ModuleList(Layer(hidden, heads, kv_heads, inter) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, VOCAB, bias=False)
        d = hidden // heads
        self.inv_freq = 1.0 / THETA ** (torch.arange(0, d, 2).float() / d)

    def forward(self, idx):
        t = idx.shape[1]
        freqs = torch.outer(torch.arange(t, device=idx.device).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((t, t), float("-inf"), device=idx.device).triu(1)
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


class LoraLinear(nn.Module):
    """PEFT's lora.Linear (Hu et al. 2021): base(x) + lora_B(lora_A(x)) * alpha / r, the base
    frozen, A kaiming-uniform (a = sqrt(5)), B zeros; lora_dropout 0 (PEFT's nn.Identity)."""

    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling


def add_lora(model, r, alpha):
    """Freezes every weight, then adapts q_proj and v_proj (PEFT's default Llama targets)."""
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.layers:
        layer.self_attn.q_proj = LoraLinear(layer.self_attn.q_proj, r, alpha)
        layer.self_attn.v_proj = LoraLinear(layer.self_attn.v_proj, r, alpha)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    ap.add_argument("--foreach", type=int, default=1, help="AdamW(foreach=...)")
    ap.add_argument("--autocast", default="", choices=["", "bf16"],
                    help="torch.autocast(dtype=bfloat16) around the forward")
    ap.add_argument("--lora", action="store_true",
                    help="LoRA r 8, alpha 16 on q_proj, v_proj; the base frozen")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    layers, hidden, heads, kv_heads, inter, ctx, batch = PRESETS[a.preset]
    torch.manual_seed(0)
    model = Llama(layers, hidden, heads, kv_heads, inter).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    if a.lora:
        add_lora(model, 8, 16)
        model.to(dev)
    trained = [p for p in model.parameters() if p.requires_grad]
    ntrained = sum(p.numel() for p in trained)
    opt = torch.optim.AdamW(trained, lr=1e-3, weight_decay=0.01, foreach=bool(a.foreach))
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (batch, ctx + 1), generator=g).to(dev)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    cast = torch.bfloat16 if a.autocast == "bf16" else None
    times, loss = time_steps(lm_step(model, opt, x, y, VOCAB, cast), a.warmup, a.steps, sync)
    print(f"last loss {loss.item():.6f}")
    print(result_line(f"{dev.type} preset={a.preset} params={nparams} trained={ntrained}"
                      f"{' autocast=bf16' if cast else ''}", times))


if __name__ == "__main__":
    sys.exit(main())
