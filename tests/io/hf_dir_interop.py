#!/usr/bin/python3
"""Independent HuggingFace model-directory writer / reader for tlaloc's round-trip tests.

Uses torch (1.13: no `safetensors` package, so the format is written from its spec: 8-byte
little-endian header length, JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
{...}}, raw little-endian data; safetensors_interop.write_tensors) and json only; it stands in for transformers' save_pretrained /
from_pretrained, which are not installed.

  hf_dir_interop.py write DIR single|sharded   a Llama-like model directory: config.json (keys
      in insertion order, not sorted), generation_config.json, tokenizer.model,
      tokenizer_config.json, weights of F32 BF16 F16 F64 I64 U8 (NaN payloads, -0, inf,
      subnormals, an empty tensor, a scalar) as model.safetensors or as shards of <= 3000 bytes
      split by HF's rule with model.safetensors.index.json
  hf_dir_interop.py compare A B   every tensor of A is in B with the same dtype, shape and bytes
      and B has no other; config.json, generation_config.json and the tokenizer files of A are
      in B with the same values (JSON values compared with their types: 1 != 1.0); B is laid out
      as save_pretrained lays it out (config.json and the index as json.dumps(indent=2,
      sort_keys=True) + "\\n",
      safetensors metadata {"format": "pt"}, headers padded to 8 bytes, shards named
      model-00001-of-0000N.safetensors, index total_size = the weights' bytes, weight_map exact)
  hf_dir_interop.py copy SRC DST   reads SRC and writes its tensors and json files as DST
      (model.safetensors)

Exit status 1 with one line per problem on stderr when a check fails.
"""
import json
import os
import re
import struct
import sys

import torch

from safetensors_interop import write_tensors

# dtype name -> (torch dtype, bytes per element, integer view of the same width)
DTYPES = {
    "F64": (torch.float64, 8), "F32": (torch.float32, 4), "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8), "U8": (torch.uint8, 1),
}
INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
KEPT = ["generation_config.json", "tokenizer.model", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "added_tokens.json"]
MAX_SHARD = 3000


def raw(t, dtype):
    """The tensor's bytes, little-endian row-major."""
    _, size = DTYPES[dtype]
    return t.contiguous().view(INT_VIEW[size]).numpy().tobytes()


def bits(values, dtype):
    """A tensor of `dtype` from integer bit patterns."""
    tdt, size = DTYPES[dtype]
    return torch.tensor(values, dtype=INT_VIEW[size]).view(tdt)


def state_dict():
    """name -> (dtype, tensor), in module order (as a state_dict is)."""
    g = torch.Generator().manual_seed(19)

    def randn(*shape, dtype="F32"):
        return (dtype, torch.randn(*shape, generator=g).to(DTYPES[dtype][0]))

    sd = {"model.embed_tokens.weight": randn(32, 16, dtype="BF16")}
    for i in range(2):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = randn(16, 16)
        sd[p + "self_attn.k_proj.weight"] = randn(8, 16)
        sd[p + "self_attn.v_proj.weight"] = randn(8, 16, dtype="BF16")
        sd[p + "self_attn.o_proj.weight"] = randn(16, 16, dtype="F16")
        sd[p + "mlp.gate_proj.weight"] = randn(24, 16, dtype="BF16")
        sd[p + "mlp.up_proj.weight"] = randn(24, 16, dtype="F16")
        sd[p + "mlp.down_proj.weight"] = randn(16, 24)
        sd[p + "input_layernorm.weight"] = randn(16)
        sd[p + "post_attention_layernorm.weight"] = randn(16, dtype="F64")
    sd["model.norm.weight"] = randn(16, dtype="F64")
    sd["lm_head.weight"] = randn(32, 16, dtype="BF16")
    # Bit patterns a conversion would not keep: NaN payloads, -0, inf, subnormals.
    sd["special.f32"] = ("F32", bits([0x7FC00001, -0x3EDCBA98, -0x80000000, 0x7F800000, 1], "F32"))
    sd["special.bf16"] = ("BF16", bits([0x7FC1, -0x7F, -0x8000, 0x0001, 0x7F80], "BF16"))
    sd["special.f16"] = ("F16", bits([0x7E01, -0x8000, 0x0001, 0x7C00, -0x401], "F16"))
    sd["empty"] = ("F32", torch.zeros(0, 4))
    sd["scalar"] = ("F32", torch.tensor(2.5))
    sd["model.position_ids"] = ("I64", torch.arange(8).reshape(1, 8) - 3)
    sd["model.mask"] = ("U8", torch.tensor([0, 1, 255], dtype=torch.uint8))
    return sd


CONFIG = {  # not sorted: tlaloc may reorder keys, never change them
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
    "max_position_embeddings": 64, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
    "initializer_range": 0.02, "bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": None,
    "torch_dtype": "bfloat16", "transformers_version": "4.44.0", "use_cache": True,
    "big": 12345678901234567, "neg": -7, "tiny": 5e-324, "zero": 0.0, "one": 1,
    "unicode": "Tlálóc ☂ \U0001F327", "empty_list": [], "empty_object": {},
    "nested": {"z": [1, 2.5, "x", None, {"deep": [[]]}], "a": True},
}
GENERATION = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.6,
              "top_p": 0.9, "transformers_version": "4.44.0"}


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, bytes, shape); data in the Rust library's order (alignment
    descending, then name), metadata {"format": "pt"} as save_pretrained writes it."""
    order = sorted(tensors, key=lambda n: (-DTYPES[tensors[n][0]][1], n))
    write_tensors(path, [(n, tensors[n][0], tensors[n][2], tensors[n][1]) for n in order],
                  {"format": "pt"})


def hf_json(value):
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def write_dir(path, tensors, config, extra, sharded):
    """tensors: name -> (dtype, bytes, shape) in state_dict order; extra: file -> bytes."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)  # insertion order
    for name, data in extra.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    if not sharded:
        write_safetensors(os.path.join(path, "model.safetensors"), tensors)
        return
    # huggingface_hub's split_state_dict_into_shards_factory.
    shards, current, size, total = [], {}, 0, 0
    for name, t in tensors.items():
        n = len(t[1])
        total += n
        if n > MAX_SHARD:
            shards.append({name: t})
            continue
        if size + n > MAX_SHARD and current:
            shards.append(current)
            current, size = {}, 0
        current[name] = t
        size += n
    if current:
        shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(path, fname), shard)
        weight_map.update({name: fname for name in shard})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        f.write(hf_json(index))


def read_safetensors(path, problems, layout):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    if layout:
        if n % 8:
            problems.append(f"{path}: header length {n} is not a multiple of 8")
        if meta != {"format": "pt"}:
            problems.append(f"{path}: metadata {meta}, not {{'format': 'pt'}}")
    body, out, covered = data[8 + n:], {}, 0
    for name, info in header.items():
        begin, end = info["data_offsets"]
        covered += end - begin
        out[name] = (info["dtype"], tuple(info["shape"]), body[begin:end])
    if covered != len(body):
        problems.append(f"{path}: tensors cover {covered} of {len(body)} data bytes")
    return out


def read_dir(path, problems, layout=False):
    """name -> (dtype, shape, bytes); checks save_pretrained's layout when `layout`."""
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single, problems, layout)
    index_path = os.path.join(path, "model.safetensors.index.json")
    text = open(index_path).read()
    index = json.loads(text)
    if layout and text != hf_json(index):
        problems.append(f"{index_path}: not formatted as json.dumps(indent=2, sort_keys=True)")
    files = sorted(set(index["weight_map"].values()))
    out = {}
    for fname in files:
        if layout and not re.fullmatch(r"model-(\d{5})-of-%05d\.safetensors" % len(files), fname):
            problems.append(f"{path}: shard name {fname} is not model-0000k-of-{len(files):05d}")
        for name, t in read_safetensors(os.path.join(path, fname), problems, layout).items():
            if index["weight_map"].get(name) != fname:
                problems.append(f"{fname}: tensor {name} is mapped to "
                                f"{index['weight_map'].get(name)}")
            if name in out:
                problems.append(f"{path}: tensor {name} is in two shards")
            out[name] = t
    if set(out) != set(index["weight_map"]):
        problems.append(f"{index_path}: weight_map names {len(index['weight_map'])} tensors, "
                        f"the shards hold {len(out)}")
    total = sum(len(t[2]) for t in out.values())
    if layout and index["metadata"].get("total_size") != total:
        problems.append(f"{index_path}: total_size {index['metadata'].get('total_size')} != "
                        f"{total}")
    return out


def typed(value):
    """A JSON value with its types made explicit (True, 1 and 1.0 all compare equal in Python)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def compare(a, b):
    problems = []
    ta, tb = read_dir(a, problems), read_dir(b, problems, layout=True)
    for name in sorted(set(ta) | set(tb)):
        if name not in tb:
            problems.append(f"tensor {name} is missing from {b}")
        elif name not in ta:
            problems.append(f"tensor {name} of {b} is not in {a}")
        elif ta[name] != tb[name]:
            da, sa, xa = ta[name]
            db, sb, xb = tb[name]
            problems.append(f"tensor {name}: {da}{list(sa)} ({len(xa)} bytes) != "
                            f"{db}{list(sb)} ({len(xb)} bytes)"
                            + (" (bytes differ)" if (da, sa) == (db, sb) else ""))
    for fname in ["config.json"] + KEPT:
        pa, pb = os.path.join(a, fname), os.path.join(b, fname)
        if not os.path.exists(pa):
            if os.path.exists(pb):
                problems.append(f"{pb}: not in {a}")
            continue
        if not os.path.exists(pb):
            problems.append(f"{pb}: missing")
        elif fname.endswith(".json"):
            va, text = json.load(open(pa)), open(pb).read()
            if typed(va) != typed(json.loads(text)):
                problems.append(f"{pb}: values differ from {pa}")
            if fname == "config.json" and text != hf_json(json.loads(text)):
                problems.append(f"{pb}: not formatted as json.dumps(indent=2, sort_keys=True)")
        elif open(pa, "rb").read() != open(pb, "rb").read():
            problems.append(f"{pb}: bytes differ from {pa}")
    for p in problems:
        print("hf_dir_interop:", p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "write" and argv[3] in ("single", "sharded"):
        tensors = {n: (d, raw(t, d), tuple(t.shape)) for n, (d, t) in state_dict().items()}
        extra = {"generation_config.json": json.dumps(GENERATION).encode(),
                 "tokenizer.model": bytes(range(256)) * 3,
                 "tokenizer_config.json": b'{"add_bos_token": true, "model_max_length": 64}'}
        write_dir(argv[2], tensors, CONFIG, extra, argv[3] == "sharded")
        return 0
    if len(argv) == 4 and argv[1] == "compare":
        return compare(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "copy":
        problems = []
        tensors = {n: (d, x, s) for n, (d, s, x) in read_dir(argv[2], problems).items()}
        extra = {f: open(os.path.join(argv[2], f), "rb").read() for f in KEPT
                 if os.path.exists(os.path.join(argv[2], f))}
        write_dir(argv[3], tensors, json.load(open(os.path.join(argv[2], "config.json"))), extra,
                  False)
        for p in problems:
            print("hf_dir_interop:", p, file=sys.stderr)
        return 1 if problems else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
