#!/usr/bin/python3
"""PyTorch (oneDNN) baseline for bench/bench_conv.cpp: F.conv2d forward, input gradient and weight
gradient (aten.convolution_backward with one output each) at the Fashion-MNIST CNN's sizes,
batch 128, f32. Prints "RESULT case=... pass=... threads=... ms=... gflops=..." lines (median of
RUNS runs). Usage: /usr/bin/python3 bench/conv_torch.py THREADS [RUNS]"""
import sys
import time

import torch
import torch.nn.functional as F

CASES = [("conv1_1x32_5x5_28", 128, 1, 32, 28, 5, 2),
         ("conv2_32x64_5x5_14", 128, 32, 64, 14, 5, 2),
         ("conv2_32x64_3x3_14", 128, 32, 64, 14, 3, 1)]


def median_ms(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    threads = int(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.set_num_threads(threads)
    for name, n, c, o, h, k, pad in CASES:
        x = torch.randn(n, c, h, h)
        w = torch.randn(o, c, k, k) * 0.1
        g = torch.randn(n, o, h, h) * 0.01
        flops = 2.0 * n * o * h * h * c * k * k
        back = lambda mask: torch.ops.aten.convolution_backward(
            g, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask)
        passes = [("forward", lambda: F.conv2d(x, w, None, 1, pad)),
                  ("input_grad", lambda: back([True, False, False])),
                  ("kernel_grad", lambda: back([False, True, False]))]
        with torch.no_grad():
            for pname, fn in passes:
                if c == 1 and pname == "input_grad":
                    continue
                ms = median_ms(fn, runs)
                print(f"RESULT case={name} pass={pname} threads={threads} ms={ms:.3f} "
                      f"gflops={flops / ms * 1e-6:.1f}", flush=True)


if __name__ == "__main__":
    main()
