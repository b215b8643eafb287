#!/usr/bin/python3
"""Writes tests/nn/fixtures/torch_pool.json: torch.nn.functional.max_pool2d / avg_pool2d
(Debian python3-torch 1.13) outputs and input gradients that tests/nn/pooling_test.cpp checks
tlaloc's trace::max_pool2d / avg_pool2d against.

Run with Debian's interpreter: /usr/bin/python3 tests/nn/make_pool_fixtures.py
Every case: x (f64, some with ties: values on a coarse grid), a cotangent ct of the output's
shape, the arguments, and torch's output and d(sum(out * ct))/dx, all in f64."""
import json
import os

import torch

torch.manual_seed(0)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def case(name, op, shape, ties=False, **kw):
    x = torch.randn(shape, dtype=torch.float64)
    if ties:
        x = torch.round(x * 2) / 2  # many equal values in a window
    x.requires_grad_(True)
    fn = torch.nn.functional.max_pool2d if op == "max" else torch.nn.functional.avg_pool2d
    out = fn(x, **kw)
    ct = torch.rand(out.shape, dtype=torch.float64) + 0.5
    (out * ct).sum().backward()
    args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()}
    return {"name": name, "op": op, "shape": list(shape), "args": args, "x": flat(x),
            "out_shape": list(out.shape), "out": flat(out), "ct": flat(ct), "grad": flat(x.grad)}


cases = [
    case("max k2", "max", (2, 3, 8, 8), kernel_size=2),
    case("max k2 ties", "max", (2, 3, 8, 8), ties=True, kernel_size=2),
    case("max k3 s2 p1", "max", (2, 2, 9, 7), kernel_size=3, stride=2, padding=1),
    case("max k3 s2 p1 ties", "max", (2, 2, 9, 7), ties=True, kernel_size=3, stride=2, padding=1),
    case("max k(2,3) s(1,2) p(1,1)", "max", (1, 2, 6, 9), kernel_size=(2, 3), stride=(1, 2),
         padding=(1, 1)),
    case("max k3 dilation 2", "max", (2, 2, 9, 10), kernel_size=3, stride=1, dilation=2),
    case("max k3 s2 p1 d(2,1)", "max", (1, 3, 10, 9), kernel_size=3, stride=2, padding=1,
         dilation=(2, 1)),
    case("max k3 s2 ceil", "max", (2, 2, 8, 10), kernel_size=3, stride=2, ceil_mode=True),
    case("max k2 s3 p1 ceil", "max", (1, 2, 8, 7), ties=True, kernel_size=2, stride=3, padding=1,
         ceil_mode=True),
    case("max 3-d input", "max", (3, 7, 6), kernel_size=2, stride=(2, 1)),
    case("avg k2", "avg", (2, 3, 8, 8), kernel_size=2),
    case("avg k3 s2 p1", "avg", (2, 2, 9, 7), kernel_size=3, stride=2, padding=1),
    case("avg k3 s2 p1 no pad count", "avg", (2, 2, 9, 7), kernel_size=3, stride=2, padding=1,
         count_include_pad=False),
    case("avg k3 s2 ceil", "avg", (2, 2, 8, 10), kernel_size=3, stride=2, ceil_mode=True),
    case("avg k3 s2 p1 ceil no pad count", "avg", (1, 2, 8, 10), kernel_size=3, stride=2,
         padding=1, ceil_mode=True, count_include_pad=False),
    case("avg k(2,3) s(2,1) p(1,0) ceil", "avg", (1, 2, 7, 6), kernel_size=(2, 3), stride=(2, 1),
         padding=(1, 0), ceil_mode=True),
    case("avg k3 divisor 5", "avg", (2, 2, 7, 7), kernel_size=3, stride=2, padding=1,
         divisor_override=5),
    case("avg 3-d input", "avg", (3, 6, 7), kernel_size=(3, 2), padding=(1, 1)),
]

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch_pool.json")
with open(path, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {path}")
