#!/usr/bin/env python3
"""The benchmark LM's train step in JAX + Optax, timed per step (peer baseline for lane (c) of
`tlaloc bench step`): the same model as bench/lm_step_torch.py (byte vocab 256, context 16,
token + position embeddings, 2 pre-norm blocks with LayerNorm, 4-head causal attention, MLP
512 with tanh GELU, final LayerNorm, untied head without bias; batch 4 x 16), next-byte cross-entropy,
optax.adamw(3e-3, weight_decay=0.01); the whole step is one jax.jit with donate_argnums for
params and optimizer state, so they are updated in place on the device, as in tlaloc's lane (c).
The data is tlaloc's too, drawn on the device as tlaloc's step draws it: 4096 resident tokens
(jax.random.randint(PRNGKey(7), ...)), and each step's window starts
jax.random.randint(fold_in(PRNGKey(1), step), (4,), 0, 4096 - 16) from a step counter the step
advances itself (nothing goes up per step), the windows gathered from the tokens.
With --apply-if-finite the update is skipped when any gradient is non-finite, as tlaloc's
found-inf does. Two modes, as `tlaloc bench step` times lane (c) (--mode, default both):
  latency: each of --steps steps waited for (jax.block_until_ready), timed one by one;
  throughput: --repeats runs of --steps steps dispatched back to back, one block_until_ready at
  the end of each; a run's time / steps is its time per step.
Prints a RESULT line per mode (latency's keeps the keys it had before the modes):
  RESULT jax <platform> optimizer=<adamw|adamw+apply_if_finite> params=N median_ms=.. min_ms=.. max_ms=.. steps=N latency_median_ms=.. latency_min_ms=.. latency_max_ms=..
  RESULT jax <platform> optimizer=.. params=N throughput_median_ms=.. throughput_min_ms=.. throughput_max_ms=.. throughput_steps=N throughput_repeats=R
"""
import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import optax

VOCAB, CONTEXT, D, HEADS, MLP, LAYERS, BATCH, TOKENS = 256, 16, 128, 4, 512, 2, 4, 4096


def linear(key, n_in, n_out):
    bound = 1.0 / n_in ** 0.5
    kw, kb = jax.random.split(key)
    return {"weight": jax.random.uniform(kw, (n_in, n_out), jnp.float32, -bound, bound),
            "bias": jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)}


def layer_norm_params():
    return {"weight": jnp.ones((D,), jnp.float32), "bias": jnp.zeros((D,), jnp.float32)}


def init(key):
    ks = jax.random.split(key, 3 + 4 * LAYERS)
    p = {"tok": jax.random.normal(ks[0], (VOCAB, D), jnp.float32),
         "pos": jax.random.normal(ks[1], (CONTEXT, D), jnp.float32),
         "ln_f": layer_norm_params(), "head": {"weight": linear(ks[2], D, VOCAB)["weight"]},
         "blocks": []}
    for l in range(LAYERS):
        k = ks[3 + 4 * l: 7 + 4 * l]
        p["blocks"].append({"ln1": layer_norm_params(), "qkv": linear(k[0], D, 3 * D),
                            "proj": linear(k[1], D, D), "ln2": layer_norm_params(),
                            "fc1": linear(k[2], D, MLP), "fc2": linear(k[3], MLP, D)})
    return p


def ln(p, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["weight"] + p["bias"]


def dense(p, x):
    return x @ p["weight"] + p["bias"]


def forward(p, idx):
    b, t = idx.shape
    x = p["tok"][idx] + p["pos"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for blk in p["blocks"]:
        q, k, v = jnp.split(dense(blk["qkv"], ln(blk["ln1"], x)), 3, axis=-1)
        q, k, v = (z.reshape(b, t, HEADS, D // HEADS).transpose(0, 2, 1, 3) for z in (q, k, v))
        s = q @ k.transpose(0, 1, 3, 2) / (D // HEADS) ** 0.5
        s = jnp.where(mask, s, -jnp.inf)
        a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, D)
        x = x + dense(blk["proj"], a)
        x = x + dense(blk["fc2"], jax.nn.gelu(dense(blk["fc1"], ln(blk["ln2"], x)), approximate=True))
    return ln(p["ln_f"], x) @ p["head"]["weight"]  # no head bias, as tlaloc's CausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--mode", choices=("latency", "throughput", "both"), default="both")
    ap.add_argument("--repeats", type=int, default=5,
                    help="throughput: runs of --steps steps, each waited for once")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--count-ops", action="store_true",
                    help="print the dot_generals and transposes of the step's StableHLO (jit "
                         "lowering, before XLA optimizes it) and exit")
    ap.add_argument("--apply-if-finite", action="store_true",
                    help="wrap AdamW in optax.apply_if_finite: a non-finite update is skipped, "
                         "the contract of tlaloc's in-program optimizer (found-inf)")
    a = ap.parse_args()
    if a.steps < 1 or a.repeats < 1 or a.warmup < 1:
        ap.error("--steps, --repeats and --warmup (the compiling first step) must be >= 1")
    params = init(jax.random.PRNGKey(0))
    nparams = sum(x.size for x in jax.tree_util.tree_leaves(params))
    tx = optax.adamw(3e-3, weight_decay=0.01)
    if a.apply_if_finite:
        tx = optax.apply_if_finite(tx, max_consecutive_errors=1 << 30)
    opt_state = tx.init(params)
    tokens = jax.random.randint(jax.random.PRNGKey(7), (TOKENS,), 0, VOCAB)
    data_key = jax.random.PRNGKey(1)

    def loss_fn(p, i):
        starts = jax.random.randint(jax.random.fold_in(data_key, i), (BATCH,), 0, TOKENS - CONTEXT)
        win = tokens[starts[:, None] + jnp.arange(CONTEXT + 1)]
        logits = forward(p, win[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, win[:, 1:]).mean()

    def step(p, s, i):
        loss, g = jax.value_and_grad(loss_fn)(p, i)
        upd, s = tx.update(g, s, p)
        return optax.apply_updates(p, upd), s, i + 1, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    count = jnp.int32(0)  # the step index the step advances (its windows are drawn from it)
    if a.count_ops:
        import re
        text = step.lower(params, opt_state, count).as_text()
        counts = {op: len(re.findall(r"\bstablehlo\." + op + r"\b", text))
                  for op in ("dot_general", "transpose")}
        print("OPS jax " + " ".join(f"{k}={v}" for k, v in counts.items()))
        return 0
    for _ in range(a.warmup):
        params, opt_state, count, loss = step(params, opt_state, count)
    jax.block_until_ready(loss)
    variant = "adamw+apply_if_finite" if a.apply_if_finite else "adamw"
    head = f"RESULT jax {jax.devices()[0].platform} optimizer={variant} params={nparams}"
    lines = []
    if a.mode in ("latency", "both"):
        times = []
        for i in range(a.steps):
            t0 = time.perf_counter()
            params, opt_state, count, loss = step(params, opt_state, count)
            jax.block_until_ready(loss)
            times.append(1e3 * (time.perf_counter() - t0))
            if a.verbose:
                print(f"step {i} {times[-1]:.4f} ms")
        med, lo, hi = statistics.median(times), min(times), max(times)
        print(f"latency: {a.steps} steps, each waited for: median {med:.4f} ms, "
              f"min {lo:.4f}, max {hi:.4f}")
        lines.append(f"{head} median_ms={med:.4f} min_ms={lo:.4f} max_ms={hi:.4f} "
                     f"steps={a.steps} latency_median_ms={med:.4f} latency_min_ms={lo:.4f} "
                     f"latency_max_ms={hi:.4f}")
    if a.mode in ("throughput", "both"):
        per_step = []
        for r in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.steps):
                params, opt_state, count, loss = step(params, opt_state, count)
            jax.block_until_ready(loss)  # the last step done: every step is (each reads the last)
            per_step.append(1e3 * (time.perf_counter() - t0) / a.steps)
            if a.verbose:
                print(f"run {r} {per_step[-1]:.4f} ms per step")
        med, lo, hi = statistics.median(per_step), min(per_step), max(per_step)
        print(f"throughput: {a.repeats} runs of {a.steps} steps, one wait each: median "
              f"{med:.4f} ms per step, min {lo:.4f}, max {hi:.4f}")
        lines.append(f"{head} throughput_median_ms={med:.4f} throughput_min_ms={lo:.4f} "
                     f"throughput_max_ms={hi:.4f} throughput_steps={a.steps} "
                     f"throughput_repeats={a.repeats}")
    print(f"last loss {float(loss):.6f}")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
