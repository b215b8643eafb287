"""The timing loop the PyTorch step baselines share (lm_step_torch.py, llama_step_torch.py): a
next-token train step, warm-up, timed steps each waited for, and the RESULT line the bench/
runners read."""
import contextlib
import resource
import statistics
import time

import torch
import torch.nn.functional as F


def lm_step(model, opt, x, y, vocab, autocast=None):
    """One train step: mean next-token cross-entropy of model(x) against y, backward, opt.step();
    returns the loss. autocast: a dtype (torch.bfloat16) to run the forward under torch.autocast
    (mixed precision: matmuls in it, f32 master weights), or None."""
    def step():
        ctx = (torch.autocast(device_type=x.device.type, dtype=autocast) if autocast
               else contextlib.nullcontext())
        with ctx:
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def time_steps(step, warmup, steps, sync, verbose=False):
    """`warmup` untimed steps, then `steps` timed ones (each waited for with sync()); returns the
    per-step times in milliseconds and the last loss."""
    for _ in range(warmup):
        step()
    sync()
    times, loss = [], None
    for i in range(steps):
        t0 = time.perf_counter()
        loss = step()
        sync()
        times.append(1e3 * (time.perf_counter() - t0))
        if verbose:
            print(f"step {i} {times[-1]:.4f} ms")
    return times, loss


def result_line(head, times, tail=""):
    """`RESULT torch <head> median_ms=.. min_ms=.. max_ms=.. steps=N <tail> peak_rss_mib=..`"""
    return (f"RESULT torch {head} median_ms={statistics.median(times):.4f} "
            f"min_ms={min(times):.4f} max_ms={max(times):.4f} steps={len(times)} "
            f"{tail + ' ' if tail else ''}"
            f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
