# Safetensors files read and written with json / struct only, for the tests/cli scripts
# (`import st` with tests/cli on PYTHONPATH; lib.bash puts it there).
import json
import struct


def read_all(path):
    """(tensors, metadata): tensors name -> (dtype, shape, raw bytes)."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}, meta


def read(path):
    return read_all(path)[0]


def write(path, t, metadata=None):
    h, off, data = ({"__metadata__": metadata} if metadata else {}), 0, b""
    for k, (dt, sh, raw) in sorted(t.items()):
        h[k] = {"dtype": dt, "shape": sh, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + data)


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)
