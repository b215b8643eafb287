#!/usr/bin/env python3
"""Reads StableHLO files that `tlaloc export` wrote with the MLIR parser and verifier bundled
in jaxlib (an independent reader of the text tlaloc emits), then compiles each through JAX's
XLA backend. A diagnostic for scripts/device-check.sh: when the PJRT lane refuses a program,
this says whether the text itself is at fault. Prints one line per file:
  OK <file> (<ops> ops in @main, parsed and verified; compile: ok | FAILED <message>)
  FAIL <file>: <the parser's or verifier's first lines>
and exits 1 if any file failed.
Usage: stablehlo_check_jax.py FILE.mlir...
"""
import sys


def compile_text(backend, text):
    """XLA compile through jaxlib's client (its Python API moved between versions)."""
    from jax._src.lib import xla_client
    attempts = []
    devices = backend.devices()[:1]
    if hasattr(backend, "compile_and_load"):
        attempts.append(lambda: backend.compile_and_load(text, xla_client.DeviceList(tuple(devices))))
        attempts.append(lambda: backend.compile_and_load(text, devices))
    if hasattr(backend, "compile"):
        attempts.append(lambda: backend.compile(text))
    errors = []
    for attempt in attempts:
        try:
            attempt()
            return "ok"
        except TypeError as e:  # a signature of another jaxlib version: try the next
            errors.append(f"TypeError: {e}")
        except Exception as e:
            lines = str(e).strip().splitlines()
            return "FAILED " + " | ".join(lines[:6])
    return "not tried (" + "; ".join(errors)[:300] + ")"


def main(paths):
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    import jax
    import jax.extend.backend  # noqa: F401  (jax.extend is not imported by jax itself)

    backend = jax.extend.backend.get_backend()
    failed = 0
    for path in paths:
        text = open(path).read()
        try:
            with jmlir.make_ir_context():
                module = ir.Module.parse(text)
                if not module.operation.verify():
                    raise RuntimeError("the module does not verify")
                ops = sum(1 for _ in module.body.operations[0].regions[0].blocks[0].operations)
            compiled = compile_text(backend, text)
            print(f"OK {path} ({ops} ops in @main, parsed and verified; compile: {compiled})")
        except Exception as e:  # report and go on: this is a diagnostic
            failed += 1
            lines = str(e).strip().splitlines() or [type(e).__name__]
            print(f"FAIL {path}: {type(e).__name__}: " + " | ".join(lines[:6]))
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
