#!/usr/bin/python3
"""Independent safetensors reader/writer (json, struct, numpy only) for tlaloc's interop test.

  safetensors_interop.py write FILE   writes the reference tensors below in the reference
                                      layout (tensors in reverse name order, to check that
                                      tlaloc does not depend on order)
  safetensors_interop.py check FILE   reads a file tlaloc wrote with the same tensors and
                                      checks layout and values; exit 1 with a message if not

Format: github.com/huggingface/safetensors README. BF16 is produced by rounding float32 to
nearest even on the bit pattern (numpy 1.24 has no bfloat16).
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
          "I32": "<i4", "U32": "<u4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def bf16_bits(values):
    bits = np.asarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def reference():
    """name -> (dtype, array). The C++ side spells the same values out by hand."""
    return {
        "f32": ("F32", (np.arange(6, dtype="<f4") - 2.5).reshape(2, 3) * np.float32(0.5)),
        "f64": ("F64", np.array([0.1, -1e300, 2.0 ** -1074], dtype="<f8")),
        "bf16": ("BF16", bf16_bits([1.0, -2.5, 3.140625, np.float32(1.0) / np.float32(3.0)])),
        "f16": ("F16", np.array([1.0, 1.0 / 3.0, -65504.0], dtype="<f2")),
        "i32": ("I32", np.array([-7, 2147483647], dtype="<i4")),
        "u32": ("U32", np.array([4294967295], dtype="<u4")),
        "i64": ("I64", np.array([-(2 ** 63)], dtype="<i8")),
        "u8": ("U8", np.array([0, 128, 255], dtype="u1")),
        "bool": ("BOOL", np.array([[True, False], [False, True]])),
        "empty_f32": ("F32", np.zeros((0, 4), dtype="<f4")),
        "empty_bf16": ("BF16", np.zeros((0,), dtype="<u2")),
        "empty_f16": ("F16", np.zeros((2, 0), dtype="<f2")),
    }


METADATA = {"source": "numpy", "step": "12345678901234567"}


def write_tensors(path, tensors, metadata):
    """tensors: [(name, dtype, shape, raw bytes)], their data laid out in that order; the
    header compact JSON padded with spaces to a multiple of 8 bytes. (hf_dir_interop.py uses it.)"""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write(path):
    ref = reference()
    write_tensors(path, [(name, ref[name][0], ref[name][1].shape,
                          np.ascontiguousarray(ref[name][1]).astype(DTYPES[ref[name][0]]).tobytes())
                         for name in sorted(ref, reverse=True)], METADATA)


def check(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    problems = []
    if n % 8:
        problems.append(f"header length {n} is not a multiple of 8")
    raw_header = data[8:8 + n]
    text = raw_header.decode("utf-8")
    if len(text) - len(text.rstrip(" ")) >= 8 or not text.rstrip(" ").endswith("}"):
        problems.append("header is not a JSON object followed by 0-7 spaces")
    header = json.loads(text)
    meta = header.pop("__metadata__", {})
    if meta != METADATA:
        problems.append(f"metadata {meta} != {METADATA}")
    names = list(header)
    if names != sorted(names):
        problems.append(f"tensors not in name order: {names}")
    body = data[8 + n:]
    pos = 0
    ref = reference()
    if sorted(names) != sorted(ref):
        problems.append(f"tensor names {sorted(names)} != {sorted(ref)}")
    for name in names:
        info = header[name]
        begin, end = info["data_offsets"]
        if begin != pos:
            problems.append(f"{name}: data begins at {begin}, expected {pos}")
        pos = end
        dtype, want = ref.get(name, (None, None))
        if info["dtype"] != dtype:
            problems.append(f"{name}: dtype {info['dtype']} != {dtype}")
            continue
        got = np.frombuffer(body[begin:end], dtype=DTYPES[dtype]).reshape(info["shape"])
        if got.shape != want.shape or got.tobytes() != want.astype(DTYPES[dtype]).tobytes():
            problems.append(f"{name}: {got!r} != {want!r}")
    if pos != len(body):
        problems.append(f"data section is {len(body)} bytes, tensors cover {pos}")
    for p in problems:
        print("interop:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        write(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
