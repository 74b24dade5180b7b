"""Host overhead of a cached ``gett.einsum`` call, against ``cupy.einsum`` and ``torch.einsum``.

    PYTHONPATH=. python benchmarks/overhead.py [--size 64] [--calls 2000] [--batches 5] [--fake-cupy]

On "ij,jk->ik" with n×n float32 operands (n = 64 by default) each function is called ``--calls``
times in a row without synchronising — the host time per call is what a Python loop of small
contractions pays before the GPU becomes the limit — and the median over ``--batches`` batches is
printed in µs (the functions' batches take turns; the device is synchronised between batches only).
gett's call is timed after a first call has planned and compiled it, so it is the cached path;
goal: at most 20 µs.
For context it also prints gett.einsum writing into ``out=`` (no allocation), on torch tensors,
``gett.contract`` on a plan (no einsum layer), and the two things every cached call pays: the launch
alone (the plan's launcher on ready arrays) and a new CuPy array (what a result without ``out=`` costs);
and ``gett.contract`` on a plan of two kernels (K = 16 n split, the reduction launched behind the kernel;
on the GPU too, 2 launches a call, so its figure is the host's or the GPU's, whichever is slower).
Without a GPU it says so and exits 0; ``--fake-cupy`` then times gett's own Python layers on the fake
CuPy of tests/fake_cupy.py (kernels compiled, launches not made): the part of a call gett controls.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

if __package__ in (None, ""):   # run as a script: the repository root holds gett
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GOAL_US = 20.0


def per_call_us(functions: dict, calls: int, batches: int) -> dict:
    """name -> median over ``batches`` of the host time per call of ``calls`` back-to-back calls, in µs.

    ``functions`` maps a name to (function, synchronise). Batches of the functions take turns, so a
    drift in the machine's speed touches them all alike; the device is synchronised between batches."""
    for fn, sync in functions.values():
        fn()
        sync()
    times: dict = {name: [] for name in functions}
    for _ in range(batches):
        for name, (fn, sync) in functions.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
            sync()
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--fake-cupy", action="store_true",
                        help="time gett's host layers on tests/fake_cupy.py (no GPU, no launches)")
    args = parser.parse_args(argv)
    if args.fake_cupy:
        return _fake_cupy(args)
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("no device")
    except Exception as e:   # no CuPy, no driver or no device
        print(f"overhead: no CUDA device ({type(e).__name__}: {e}); nothing to measure")
        return 0
    import numpy as np

    import gett
    from gett.launch import launcher

    n, expr = args.size, "ij,jk->ik"
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    A, B = cp.asarray(a), cp.asarray(b)
    out = cp.empty((n, n), np.float32)
    np.testing.assert_allclose(cp.asnumpy(gett.einsum(expr, A, B)), a @ b, rtol=1e-4, atol=1e-4)

    sync = cp.cuda.Device().synchronize
    plan = gett.plan_contraction(A, "ij", B, "jk", out, "ik")
    functions = {"gett.einsum (cached)": (lambda: gett.einsum(expr, A, B), sync),
                 "cupy.einsum": (lambda: cp.einsum(expr, A, B), sync)}
    try:
        import torch
        TA, TB = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        functions["torch.einsum"] = (lambda: torch.einsum(expr, TA, TB), torch.cuda.synchronize)
        functions["gett.einsum (torch)"] = (lambda: gett.einsum(expr, TA, TB), torch.cuda.synchronize)
    except ImportError:
        print("torch is not installed: no torch.einsum figure")
    functions["gett.einsum out="] = (lambda: gett.einsum(expr, A, B, out=out), sync)
    functions["gett.contract (plan)"] = (lambda: gett.contract(plan, 1.0, A, B, 0.0, out), sync)
    run = launcher(plan, out.device.id, "cupy")
    functions["launch alone"] = (lambda: run(A, B, out, out, 1.0, 0.0), sync)
    functions["cupy.ndarray (alloc)"] = (lambda: cp.ndarray((n, n), np.float32), sync)
    # a chain: K = 16 n is split, and the reduction is launched behind the kernel (gett.dependent_launch)
    L, R = cp.asarray(rng.standard_normal((n, 16 * n), dtype=np.float32)), cp.asarray(b.repeat(16, axis=0))
    chained = gett.plan_contraction(L, "ik", R, "kj", out, "ij")
    if chained.kernel().config.split_k > 1:
        functions["gett.contract (split K)"] = (lambda: gett.contract(chained, 1.0, L, R, 0.0, out), sync)
    rows = per_call_us(functions, args.calls, args.batches)
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"host time per call, {expr} on {n}x{n} float32, {gpu} "
          f"(median of {args.batches} batches of {args.calls} calls):")
    for name, us in rows.items():
        print(f"  {name:<24} {us:8.2f} µs")
    cached = rows["gett.einsum (cached)"]
    verdict = "met" if cached <= GOAL_US else "MISSED"
    print(f"gett.einsum cached call: {cached:.2f} µs (goal ≤ {GOAL_US:.0f} µs: {verdict})")
    print(f"plan cache: {gett.cache_info()}")
    return 0


def _fake_cupy(args) -> int:
    """gett's host time per call with tests/fake_cupy.py as CuPy: everything but CuPy's own work."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    import fake_cupy

    import gett
    with fake_cupy.installed(record=False):
        cp = sys.modules["cupy"]
        n, expr = args.size, "ij,jk->ik"
        A, B, out = cp.ndarray((n, n)), cp.ndarray((n, n)), cp.ndarray((n, n))
        plan = gett.plan_contraction(A, "ij", B, "jk", out, "ik")
        empty = cp.ndarray((n, n))
        cp.ndarray = lambda shape, dtype: empty   # a result costs what CuPy's allocation costs, not the fake's
        def nothing():
            pass
        rows = per_call_us({"gett.einsum (cached)": (lambda: gett.einsum(expr, A, B), nothing),
                            "gett.einsum out=": (lambda: gett.einsum(expr, A, B, out=out), nothing),
                            "gett.contract (plan)": (lambda: gett.contract(plan, 1.0, A, B, 0.0, out), nothing)},
                           args.calls, args.batches)
    print(f"gett's host time per call on a fake CuPy (no CuPy work, no launch), {expr} on {n}x{n} float32 "
          f"(median of {args.batches} batches of {args.calls} calls):")
    for name, us in rows.items():
        print(f"  {name:<24} {us:8.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
