#!/usr/bin/python3
"""Writes tests/optim/fixtures/torch_optim.json: PyTorch (Debian python3-torch 1.13) optimizer
trajectories that tests/optim checks tlaloc's optimizers against.

Run with Debian's interpreter: /usr/bin/python3 tests/optim/make_fixtures.py
Every case: a few small f32 parameters, >= 12 steps of given gradients, and after each step the
parameters and optimizer state (torch's names: exp_avg, exp_avg_sq, max_exp_avg_sq,
momentum_buffer). Values are f32 numbers written as decimal doubles (exact)."""
import json
import os

import torch

STEPS = 12
SHAPES = [(3, 4), (5,)]


def grads_for(gen, step):
    # Large gradients early, small later: the second moment shrinks, so AMSGrad's running max
    # differs from exp_avg_sq.
    scale = 2.0 if step < 4 else 0.25
    return [torch.randn(s, generator=gen) * scale for s in SHAPES]


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def run_case(name, cls, hyper, groups=None, max_norm=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in SHAPES]
    init = [flat(p) for p in params]
    if groups is None:
        opt = cls(params, foreach=False, **hyper)
    else:
        opt = cls([{"params": [params[i] for i in g["params"]], **g["hyper"]} for g in groups],
                  foreach=False, **hyper)
    steps = []
    for k in range(STEPS):
        gs = grads_for(gen, k)
        for p, g in zip(params, gs):
            p.grad = g.clone()
        norm = None
        if max_norm is not None:
            norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        opt.step()
        rec = {"grads": [flat(g) for g in gs], "params": [flat(p) for p in params], "state": {}}
        if norm is not None:
            rec["grad_norm"] = norm
        for p in params:
            for key, val in opt.state[p].items():
                if key == "step" or val is None:
                    continue
                rec["state"].setdefault(key, []).append(flat(val))
        steps.append(rec)
    out = {"name": name, "optimizer": cls.__name__, "hyper": hyper, "shapes": [list(s) for s in SHAPES],
           "init": init, "steps": steps}
    if groups is not None:
        out["groups"] = groups
    if max_norm is not None:
        out["max_norm"] = max_norm
    return out


def main():
    torch.set_num_threads(1)
    SGD, Adam, AdamW = torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW
    cases = [
        run_case("sgd", SGD, {"lr": 0.1}),
        run_case("sgd_momentum", SGD, {"lr": 0.05, "momentum": 0.9}),
        run_case("sgd_dampening", SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
        run_case("sgd_nesterov", SGD, {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
        run_case("sgd_weight_decay", SGD, {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1}),
        run_case("sgd_maximize", SGD, {"lr": 0.05, "momentum": 0.9, "maximize": True}),
        run_case("sgd_all", SGD, {"lr": 0.02, "momentum": 0.7, "dampening": 0.2, "weight_decay": 0.05,
                                  "maximize": True}),
        run_case("adam", Adam, {"lr": 0.01}),
        run_case("adam_betas_eps", Adam, {"lr": 0.003, "betas": [0.8, 0.95], "eps": 1e-3}),
        run_case("adam_weight_decay", Adam, {"lr": 0.01, "weight_decay": 0.1}),
        run_case("adam_amsgrad", Adam, {"lr": 0.01, "amsgrad": True}),
        run_case("adam_maximize", Adam, {"lr": 0.01, "maximize": True}),
        run_case("adam_all", Adam, {"lr": 0.02, "weight_decay": 0.05, "amsgrad": True, "maximize": True}),
        run_case("adamw", AdamW, {"lr": 0.01}),
        run_case("adamw_weight_decay", AdamW, {"lr": 0.01, "weight_decay": 0.3}),
        run_case("adamw_amsgrad", AdamW, {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
        run_case("adamw_maximize", AdamW, {"lr": 0.01, "maximize": True}),
        run_case("adamw_groups", AdamW, {"lr": 0.01, "weight_decay": 0.1},
                 groups=[{"name": "decay", "params": [0], "hyper": {"lr": 0.02}},
                         {"name": "no_decay", "params": [1], "hyper": {"weight_decay": 0.0}}]),
        run_case("adamw_clip", AdamW, {"lr": 0.01}, max_norm=1.0),
        run_case("sgd_clip", SGD, {"lr": 0.1, "momentum": 0.9}, max_norm=0.5),
    ]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "torch_optim.json")
    with open(path, "w") as f:
        json.dump({"generator": "tests/optim/make_fixtures.py", "torch": torch.__version__,
                   "cases": cases}, f)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
