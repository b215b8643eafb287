# tensors_equal.py A B [TENSOR...]: exits 0 when safetensors files A and B hold the same tensor
# names, dtypes, shapes and bytes and the same metadata step (the free text of the header may
# differ), and every TENSOR named is among them; used by the resume tests in tests/cli.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st import read_all  # noqa: E402

a, ma = read_all(sys.argv[1])
b, mb = read_all(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
for name in sys.argv[3:]:
    assert name in a, f"no tensor {name} in {sorted(a)}"
bad = [k for k in a if a[k] != b[k]]
assert not bad, f"tensors differ after resume: {bad}"
assert ma.get('step') == mb.get('step'), (ma.get('step'), mb.get('step'))
print(f"resume: {len(a)} tensors bitwise equal, step {ma.get('step')}")
