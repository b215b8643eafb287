# tensors_equal.py A B [TENSOR...]: exits 0 when safetensors files A and B hold the same tensor
# names, dtypes, shapes and bytes and the same metadata step (the free text of the header may
# differ), and every TENSOR named is among them; used by the resume tests in tests/cli.
import json
import struct
import sys


def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__', {})
    data = b[8 + n:]
    return {k: (v['dtype'], v['shape'], data[v['data_offsets'][0]:v['data_offsets'][1]])
            for k, v in h.items()}, meta


a, ma = load(sys.argv[1])
b, mb = load(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
for name in sys.argv[3:]:
    assert name in a, f"no tensor {name} in {sorted(a)}"
bad = [k for k in a if a[k] != b[k]]
assert not bad, f"tensors differ after resume: {bad}"
assert ma.get('step') == mb.get('step'), (ma.get('step'), mb.get('step'))
print(f"resume: {len(a)} tensors bitwise equal, step {ma.get('step')}")
