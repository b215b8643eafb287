#!/usr/bin/env python3
"""The benchmark LM's train step in PyTorch, timed per step (peer baseline for `tlaloc bench step`).

Model (issue 7, "the benchmark model"): byte vocab 256, context 16, learned token and position
embeddings, 2 pre-norm blocks (LayerNorm with biases, 4-head causal self-attention, MLP 128->512
->128 with tanh GELU), final LayerNorm, untied head without bias (as tlaloc's); batch 4 x 16; next-byte cross-entropy;
AdamW(lr 3e-3, weight_decay 0.01) -- fused=True on CUDA (torch >= 2.0), else the default.
Prints one line per timed step with --verbose, and a final line
  RESULT torch <device> params=N median_ms=.. min_ms=.. max_ms=.. steps=N optimizer=..
"""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_step import lm_step, result_line, time_steps

VOCAB, CONTEXT, D, HEADS, MLP, LAYERS, BATCH = 256, 16, 128, 4, 512, 2, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, MLP)
        self.fc2 = nn.Linear(MLP, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / (D // HEADS) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(CONTEXT, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)  # as tlaloc's CausalLM head

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--autocast", default="", choices=["", "bf16"],
                    help="torch.autocast(dtype=bfloat16) around the forward")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = LM().to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    kind = "AdamW"
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01,
                                fused=dev.type == "cuda")
        kind = "AdamW(fused)" if dev.type == "cuda" else "AdamW"
    except TypeError:  # torch < 2.0 has no fused AdamW
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1), generator=g).to(dev)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    cast = torch.bfloat16 if a.autocast == "bf16" else None
    times, loss = time_steps(lm_step(model, opt, x, y, VOCAB, cast), a.warmup, a.steps, sync,
                             a.verbose)
    print(f"last loss {loss.item():.6f}")
    print(result_line(f"{dev.type} params={nparams}{' autocast=bf16' if cast else ''}", times,
                      f"optimizer={kind}"))


if __name__ == "__main__":
    sys.exit(main())
