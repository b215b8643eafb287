#!/usr/bin/python3
"""Writes tests/nn/fixtures/torch_conv.json: PyTorch (Debian python3-torch 1.13) conv1d / conv2d /
conv3d forward values and gradients that tests/nn/conv_torch_test.cpp checks tlaloc's
convolution (forward, and the VJP's input and kernel gradients) against.

Run with Debian's interpreter: /usr/bin/python3 tests/nn/make_conv_fixtures.py
Inputs are not stored: x[i] = sin(0.7 i + 1), weight[i] = sin(1.3 i + 2) / 2, and the loss is
sum(out * ct) with ct[i] = cos(0.3 i) (i the row-major index); computed in float64."""
import json
import math
import os

import torch
import torch.nn.functional as F

CASES = [
    # name, x shape, weight shape, stride, padding, dilation, groups
    ("conv2d_basic", (2, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1),
    ("conv2d_stride_dilation_rect", (2, 4, 9, 8), (6, 4, 3, 2), 2, (1, 2), (2, 1), 1),
    ("conv2d_groups2", (2, 4, 6, 6), (6, 2, 3, 3), (2, 1), 1, 1, 2),
    ("conv2d_depthwise", (2, 3, 6, 5), (6, 1, 3, 3), 1, 1, 1, 3),
    ("conv2d_fmnist_like", (2, 1, 8, 8), (4, 1, 5, 5), 1, 2, 1, 1),
    ("conv2d_stride3_nopad", (1, 2, 10, 11), (3, 2, 4, 3), 3, 0, 1, 1),
    ("conv1d", (3, 2, 10), (4, 2, 3), 2, 1, 2, 1),
    ("conv1d_groups", (2, 4, 9), (8, 1, 2), 1, 0, 1, 4),
    ("conv3d", (1, 2, 5, 4, 4), (3, 2, 2, 3, 2), (1, 2, 1), (1, 0, 1), 1, 1),
]


def filled(shape, a, b, scale):
    n = math.prod(shape)
    v = [math.sin(a * i + b) * scale for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape)


def main():
    out = []
    for name, xs, ws, stride, padding, dilation, groups in CASES:
        x = filled(xs, 0.7, 1.0, 1.0).requires_grad_()
        w = filled(ws, 1.3, 2.0, 0.5).requires_grad_()
        fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
        y = fn(x, w, None, stride, padding, dilation, groups)
        n = y.numel()
        ct = torch.tensor([math.cos(0.3 * i) for i in range(n)], dtype=torch.float64)
        (y * ct.reshape(y.shape)).sum().backward()
        listed = lambda v, k: list(v) if isinstance(v, (tuple, list)) else [v] * k
        k = len(xs) - 2
        out.append({
            "name": name, "x": list(xs), "w": list(ws), "stride": listed(stride, k),
            "padding": listed(padding, k), "dilation": listed(dilation, k), "groups": groups,
            "y_shape": list(y.shape),
            "y": y.detach().reshape(-1).tolist(),
            "grad_x": x.grad.reshape(-1).tolist(),
            "grad_w": w.grad.reshape(-1).tolist(),
        })
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch_conv.json")
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "cases": out}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
