#!/usr/bin/python3
"""The `tlaloc train fmnist` job in PyTorch (the baseline of bench/run_fmnist_bench.sh).

Same model (MLP 784 -> hidden -> 10, ReLU; or with --model cnn tlaloc's CNN: per entry of
--channels a block Conv2d 3x3 padding 1, BatchNorm2d, ReLU, MaxPool2d 2, then Flatten and Linear,
the last partial batch of an epoch dropped as tlaloc does), batch, optimizer (AdamW, decoupled weight decay,
lr schedule: linear warm-up over --warmup steps then cosine, as tlaloc's default),
data (Fashion-MNIST idx files, pixels / 255) and epochs. Prints one line per epoch:
`epoch E time S test_accuracy A`. Threads: torch.set_num_threads(--threads).
"""
import argparse
import gzip
import math
import struct
import time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", default="256")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--channels", default="32,64")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=469)
    p.add_argument("--wd", type=float, default=1e-2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d = a.data
    xtr = torch.from_numpy(read_idx(f"{d}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
    ytr = torch.from_numpy(read_idx(f"{d}/train-labels-idx1-ubyte.gz").astype(np.int64))
    xte = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255)
    yte = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    layers = []
    cnn = a.model == "cnn"
    if cnn:
        layers.append(torch.nn.Unflatten(1, (1, 28, 28)))
        prev, side = 1, 28
        for c in [int(h) for h in a.channels.split(",")]:
            layers += [torch.nn.Conv2d(prev, c, 3, padding=1), torch.nn.BatchNorm2d(c),
                       torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
            prev, side = c, side // 2
        layers += [torch.nn.Flatten(), torch.nn.Linear(prev * side * side, 10)]
    else:
        sizes = [784] + [int(h) for h in a.hidden.split(",")] + [10]
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.wd)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    steps = n // a.batch if cnn else (n + a.batch - 1) // a.batch
    total = steps * a.epochs
    warm = min(a.warmup, total - 1)

    def factor(step):  # tlaloc's warmup-cosine (tlaloc/optim/schedule.h)
        if step < warm:
            return (step + 1) / warm
        t, T = step - warm, total - warm
        return 0.5 * (1 + math.cos(math.pi * min(t, T) / T))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    for epoch in range(a.epochs):
        t0 = time.perf_counter()
        order = torch.randperm(n)
        model.train()
        for b in range(0, steps * a.batch, a.batch):
            idx = order[b:b + a.batch]
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        secs = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = torch.cat([model(xte[i:i + 1000]).argmax(1) for i in range(0, len(yte), 1000)])
            acc = (acc == yte).float().mean().item()
        print(f"epoch {epoch + 1} time {secs:.4f} test_accuracy {acc:.4f}", flush=True)


if __name__ == "__main__":
    main()
