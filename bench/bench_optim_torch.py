#!/usr/bin/python3
"""torch.optim.AdamW(foreach=True) step time on the CPU, the comparison arm of bench_optim.

Run with Debian's interpreter (python3-torch 1.13); set OMP_WAIT_POLICY=passive and the thread
count with --threads. Prints one line per size:
    torch_adamw_foreach n=<elements> threads=<t> ms=<median step ms> GBps=<28 B/element rate>
"""
import argparse
import statistics
import time

import torch


def bench(n, reps):
    p = torch.nn.Parameter(torch.ones(n))
    p.grad = torch.full((n,), 0.01)
    opt = torch.optim.AdamW([p], lr=1e-3, foreach=True)
    for _ in range(3):  # warm-up; allocates the state
        opt.step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default="1048576,4194304,16777216")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for n in (int(s) for s in args.sizes.split(",")):
        sec = bench(n, args.reps)
        print(f"torch_adamw_foreach n={n} threads={args.threads} ms={sec * 1e3:.3f} "
              f"GBps={28 * n / sec / 1e9:.3f}", flush=True)


if __name__ == "__main__":
    main()
