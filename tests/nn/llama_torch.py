#!/ usr / bin / python3
"""An independent PyTorch implementation of HuggingFace's Llama equations, the oracle of
tests/nn/llama_test.cpp (torch 1.13 has no Llama class; the math is written out here from
transformers' modeling_llama.py and modeling_rope_utils.py).

  llama_torch.py DIR   for every DIR/NAME.in.safetensors writes DIR/NAME.out.safetensors

An input file holds the model's weights under HF's names (float32 or float64), input_ids (I32
[batch, seq]), optionally attention_mask (I32 [batch, seq]), and metadata: "config" (the
config.json text), "dtype" ("float32" or "float64": the computation's), "interleaved" ("1": the
q_proj / k_proj weights are in Meta's interleaved layout; they are permuted into HF's layout with
convert_llama_weights_to_hf.py's permute() before the HF equations run), "grad" ("1": also the
mean next-token cross-entropy and its gradient) and "lora_scaling" (a Linear NAME with weights
NAME.lora_A.weight [r, in] and NAME.lora_B.weight [out, r] adds PEFT's LoRA term
(x A^T) B^T * lora_scaling, from Hu et al. 2021). The output holds logits [batch, seq, vocab],
inv_freq [head_dim / 2] and, with grad, loss [] and grad.<weight name> for every weight.

In float32 the RoPE frequencies and tables are computed in float32 as HF does; in float64
everything (RoPE and RMSNorm included) is computed in float64, HF's equations in one precision.
"""
import glob
import json
import math
import os
import struct
import sys

import numpy as np
import torch

NP = {"F32": "<f4", "F64": "<f8", "I32": "<i4"}


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        arr = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=NP[h["dtype"]])
        tensors[name] = torch.from_numpy(arr.reshape(h["shape"]).copy())
    return tensors, meta


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = tensors[name].detach().contiguous().numpy()
        dtype = {np.float32: "F32", np.float64: "F64"}[arr.dtype.type]
        raw = arr.astype(NP[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def permute(w, n_heads):
    """convert_llama_weights_to_hf.py: Meta's interleaved rows -> HF's rotate-half rows."""
    dim1 = w.shape[0]
    rest = w.shape[1:]
    return w.view(n_heads, dim1 // n_heads // 2, 2, *rest).transpose(1, 2).reshape(dim1, *rest)


def inv_freq(cfg, head_dim, dt):
    """_compute_default_rope_parameters, then _compute_llama3_parameters."""
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(dt) / head_dim))
    rs = cfg.get("rope_scaling")
    if rs is None or rs.get("rope_type", rs.get("type")) == "default":
        return inv
    assert rs.get("rope_type", rs.get("type")) == "llama3"
    factor = rs["factor"]
    low_freq_factor = rs["low_freq_factor"]
    high_freq_factor = rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor -
                                                                     low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, weight, eps):
    """LlamaRMSNorm (in the computation's precision: float32, or float64 for the f64 check)."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def forward(w, cfg, ids, mask, dt, lora_scaling=0.0):
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    B, S = ids.shape
#LlamaRotaryEmbedding : freqs = inv_freq ⊗ positions, emb = cat(freqs, freqs).
    inv = inv_freq(cfg, D, dt)
    freqs = torch.arange(S, dtype=dt)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
#The 4 - d mask : causal, plus padding keys; finfo.min as HF's (no NaN on empty rows).
    allowed = torch.ones(S, S, dtype=torch.bool).tril()[None, None]
    if mask is not None:
        allowed = allowed & (mask[:, None, None, :] != 0)
    bias = torch.zeros(allowed.shape, dtype=dt).masked_fill(~allowed, torch.finfo(dt).min)

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        y = y + w[name + ".bias"] if name + ".bias" in w else y
        if name + ".lora_A.weight" in w:  # PEFT's lora.Linear: + lora_B(lora_A(x)) * scaling
            y = y + (x @ w[name + ".lora_A.weight"].T) @ w[name + ".lora_B.weight"].T * lora_scaling
        return y

    x = w["model.embed_tokens.weight"][ids.long()]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj").view(B, S, H, D).transpose(1, 2)
        k = linear(h, p + "self_attn.k_proj").view(B, S, Hkv, D).transpose(1, 2)
        v = linear(h, p + "self_attn.v_proj").view(B, S, Hkv, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // Hkv, dim=1)  # repeat_kv
        v = v.repeat_interleave(H // Hkv, dim=1)
        scores = q @ k.transpose(2, 3) * D ** -0.5 + bias
        attn = torch.softmax(scores, dim=-1)
        o = (attn @ v).transpose(1, 2).reshape(B, S, H * D)
        x = x + linear(o, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        act = torch.nn.functional.silu(linear(h, p + "mlp.gate_proj"))
        x = x + linear(act * linear(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    return x @ head.T, inv


def run_case(path):
    tensors, meta = read_safetensors(path)
    cfg = json.loads(meta["config"])
    dt = {"float32": torch.float32, "float64": torch.float64}[meta["dtype"]]
    ids = tensors.pop("input_ids")
    mask = tensors.pop("attention_mask", None)
    w = {
k: v.to(dt).requires_grad_(True) for k, v in tensors.items()}
    hf = dict(w)
    if meta.get("interleaved") == "1":
        H = cfg["num_attention_heads"]
        Hkv = cfg.get("num_key_value_heads") or H
        for name in list(hf):
            if ".self_attn.q_proj." in name:
                hf[name] = permute(hf[name], H)
            elif ".self_attn.k_proj." in name:
                hf[name] = permute(hf[name], Hkv)
    logits, inv = forward(hf, cfg, ids, mask, dt, float(meta.get("lora_scaling", "0")))
    out = {
  "logits" : logits, "inv_freq" : inv}
    if meta.get("grad") == "1":
        V = logits.shape[-1]
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V),
                                                 ids[:, 1:].reshape(-1).long())
        loss.backward()
        out["loss"] = loss
        for name, t in w.items():
            out["grad." + name] = t.grad
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), out)


def main():
    torch.set_num_threads(1)
    paths = sorted(glob.glob(os.path.join(sys.argv[1], "*.in.safetensors")))
    if not paths:
        sys.exit(f"llama_torch.py: no *.in.safetensors in {sys.argv[1]}")
    for path in paths:
        run_case(path)


if __name__ == "__main__":
    main()
