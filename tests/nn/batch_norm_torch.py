# PyTorch oracle for tests/nn/batch_norm_test.cpp: torch.nn.BatchNorm2d trained with SGD on the
# same formula-made batches as the C++ test, printed as JSON. Run by Debian's /usr/bin/python3.
import json
import math
import sys

import torch


def batch(step, shape):
    n = 1
    for d in shape:
        n *= d
    v = [math.sin(0.37 * i + 1.3 * step) * (1 + 0.1 * step) + 0.05 * step + 0.01 * (i % 7)
         for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape)


def target(shape):
    n = 1
    for d in shape:
        n *= d
    return torch.tensor([math.cos(0.11 * i) for i in range(n)], dtype=torch.float64).reshape(shape)


def run(momentum, steps, shape, lr):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(shape[1], momentum=momentum).double()
    opt = torch.optim.SGD(bn.parameters(), lr=lr)
    t = target(shape)
    losses = []
    for s in range(steps):
        opt.zero_grad()
        y = bn(batch(s, shape))
        loss = ((y - t) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    bn.eval()
    y_eval = bn(batch(100, shape))
    out = {k: v.detach().reshape(-1).tolist() for k, v in bn.state_dict().items()}
    out["losses"] = losses
    out["eval"] = y_eval.detach().reshape(-1).tolist()
    return out


def main():
    shape = [4, 3, 5, 5]
    print(json.dumps({"momentum_0.1": run(0.1, 10, shape, 0.1),
                      "momentum_none": run(None, 10, shape, 0.1)}))


if __name__ == "__main__":
    sys.exit(main())
