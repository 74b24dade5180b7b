"""Odd extents: einsums whose row lengths are not multiples of 8 (row-major arrays, rows unaligned for
16-byte loads), through gett with the planner's staging (16-bit operands copied into padded runs where that
pays, gett.staging._staged_for_alignment), through gett without staging, and through torch.einsum.

    PYTHONPATH=. python benchmarks/odd_extents.py [--padded] [--dtype f16,f32] [--only 'ik,kj->ij:4097']

``--padded``: the inputs are views of buffers whose rows are padded to 16 bytes (aligned rows, odd extents:
vectors clipped at each row's end, no copies). Per case: GPU time (median of 30 calls queued behind a held
stream, over buffer sets that evict L2), the relative error against float64 with the output poisoned with NaN
first, and each plan's kernel and copies.
"""
from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = (
    ("ik,kj->ij", dict(i=4095, k=777, j=129)), ("ik,kj->ij", dict(i=999, k=999, j=999)),
    ("ik,kj->ij", dict(i=4097, k=4097, j=4097)), ("ik,kj->ij", dict(i=8191, k=1001, j=257)),
    ("ik,kj->ij", dict(i=2047, k=2047, j=2047)), ("ik,kj->ij", dict(i=300, k=300, j=300)),
    ("ik,kj->ij", dict(i=100, k=100, j=100)), ("ik,kj->ij", dict(i=1000, k=1000, j=1000)),
    ("bik,bkj->bij", dict(b=32, i=255, k=255, j=255)), ("bik,bkj->bij", dict(b=1024, i=33, k=33, j=33)),
    ("ik,jk->ij", dict(i=4095, k=777, j=1025)), ("ij,j->i", dict(i=8191, j=8191)), ("ij,i->j", dict(i=8191, j=8191)),
    ("bhqd,bhkd->bhqk", dict(b=4, h=12, q=1023, k=1023, d=65)),
)


def case_name(expr: str, extents: dict) -> str:
    return f"{expr}:{'x'.join(str(e) for e in extents.values())}"


def padded_rows(x, multiple: int):
    """``x`` copied into a buffer whose last dimension is padded to ``multiple`` elements; the view of its shape."""
    import cupy
    last = -(-x.shape[-1] // multiple) * multiple
    buf = cupy.empty(x.shape[:-1] + (last,), x.dtype)
    buf[..., :x.shape[-1]] = x
    return buf[..., :x.shape[-1]]


def measure(expr: str, extents: dict, dtype, padded: bool, l2_bytes: int) -> str:
    import cupy
    import numpy
    import torch

    import gett
    from tccg_suite.timing import median_ms, rotation_count

    ins, out = expr.split("->")
    names = ins.split(",")
    shapes = [tuple(extents[m] for m in t) for t in names]
    oshape = tuple(extents[m] for m in out)
    item = numpy.dtype(dtype).itemsize
    nbytes = (sum(int(numpy.prod(s)) for s in shapes) + int(numpy.prod(oshape))) * item
    rng = cupy.random.default_rng(0)
    sets = [[(rng.random(s, dtype=cupy.float32) * 2 - 1).astype(dtype) for s in shapes]
            for _ in range(rotation_count(nbytes, l2_bytes, 8))]
    if padded:
        sets = [[padded_rows(x, 16 // item) for x in s] for s in sets]
    outs = [cupy.empty(oshape, dtype) for _ in sets]
    ref = cupy.einsum(expr, *[x.astype(cupy.float64) for x in sets[0]])
    row, kernels = f"{numpy.dtype(dtype).name:8s} {case_name(expr, extents):30s}", []
    for staging in (None, False):
        plan = gett.plan_contraction(sets[0][0], names[0], sets[0][1], names[1], outs[0], out, beta=0, staging=staging)
        outs[0].fill(numpy.nan)
        gett.contract(plan, 1.0, sets[0][0], sets[0][1], 0.0, outs[0])
        err = float(cupy.linalg.norm((outs[0].astype(cupy.float64) - ref).ravel()) / cupy.linalg.norm(ref.ravel()))
        us = median_ms(lambda i: gett.contract(plan, 1.0, sets[i][0], sets[i][1], 0.0, outs[i]), runs=30,
                       rotate=len(sets)) * 1e3
        row += f" {us:9.1f} {err:8.1e}"
        copies = ", ".join(f"{st.tensor} {st.target.strides}" for st in plan.staging)
        key = (plan.staged_plan or plan).kernel().config.key()
        kernels.append(key + (f" after copies of {copies}" if copies else ""))
    torch_sets = [[torch.as_tensor(x, device="cuda") for x in s] for s in sets]
    us = median_ms(lambda i: torch.einsum(expr, *torch_sets[i]), runs=30, rotate=len(sets)) * 1e3
    return row + f" {us:9.1f}\n    planner: {kernels[0]}\n    unstaged: {kernels[1]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--padded", action="store_true", help="inputs in buffers with rows padded to 16 bytes")
    parser.add_argument("--dtype", default="f16,f32", help="comma-separated: f16, f32")
    parser.add_argument("--only", default="",
                        help="';'-separated case names (einsum:extents, e.g. ik,kj->ij:4097x4097x4097)")
    args = parser.parse_args(argv)
    import cupy
    import numpy
    only = set(filter(None, args.only.split(";")))
    l2 = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["l2CacheSize"]
    print(f"GPU: {cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)['name'].decode()}; "
          f"{'rows padded to 16 bytes' if args.padded else 'row-major arrays'}; times in us, errors against float64")
    heads = (("gett us", 9), ("err", 8), ("unstaged", 9), ("err", 8), ("torch us", 9))
    print(f"{'dtype':8s} {'einsum:extents':30s} " + " ".join(f"{h:>{w}s}" for h, w in heads))
    for name in args.dtype.split(","):
        dtype = {"f16": numpy.float16, "f32": numpy.float32}[name]
        for expr, extents in CASES:
            if not only or case_name(expr, extents) in only:
                print(measure(expr, extents, dtype, args.padded, l2), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
