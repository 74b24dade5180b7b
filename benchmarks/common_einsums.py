"""Beyond TCCG: everyday einsums through ``gett.einsum`` against ``torch.einsum`` and ``cupy.einsum``.

    PYTHONPATH=. python benchmarks/common_einsums.py [--dtype f16|f32] [--only 'i,i->;ij,ij->i'] [--runs 30]

GEMMs square and odd (rows of an odd length: unaligned), batched and attention-shaped products, a linear layer, tensor-network contractions,
matrix-vector products, dot products, row-wise dots, an outer product and degenerate extents. The TCCG suite
(tccg_suite) is what gett is tuned on; this list looks for shapes it handles badly. Per einsum: the relative
error of each library against float64 (cupy.einsum), the GPU time (median of ``--runs`` calls queued behind a
held stream, as the TCCG runner times them, over enough buffer sets that no call finds its inputs in L2),
the roofline time max(minimal bytes / copy bandwidth, flops / cuBLAS GEMM rate) measured on this GPU, and
gett's time over torch's. Arrays are row-major (C order), as CuPy and PyTorch make them; 16-bit data
accumulates in f32 (all three libraries).
"""
from __future__ import annotations

import argparse
import math
import os
import sys

if __package__ in (None, ""):   # run as a script: the repository root holds gett and tccg_suite
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = (
    ("ik,kj->ij", dict(i=4096, k=4096, j=4096)),
    ("ik,kj->ij", dict(i=1000, k=1000, j=1000)),
    ("ik,kj->ij", dict(i=4095, k=777, j=129)),
    ("ik,kj->ij", dict(i=2047, k=2047, j=2047)),
    ("bik,bkj->bij", dict(b=64, i=256, k=256, j=256)),
    ("bik,bkj->bij", dict(b=4096, i=32, k=32, j=32)),
    ("bhqd,bhkd->bhqk", dict(b=8, h=16, q=512, k=512, d=64)),
    ("bhqk,bhkd->bhqd", dict(b=8, h=16, q=512, k=512, d=64)),
    ("bsd,df->bsf", dict(b=16, s=512, d=1024, f=4096)),
    ("bsf,df->bsd", dict(b=16, s=512, d=1024, f=4096)),
    ("abcd,cdef->abef", dict(a=32, b=32, c=32, d=32, e=32, f=32)),
    ("abcd,dcef->fabe", dict(a=24, b=48, c=40, d=36, e=20, f=28)),
    ("ij,j->i", dict(i=8192, j=8192)),
    ("ij,i->j", dict(i=8192, j=8192)),
    ("i,i->", dict(i=1 << 24)),
    ("ij,ij->i", dict(i=4096, j=4096)),
    ("ij,ij->i", dict(i=65536, j=256)),
    ("ij,ij->j", dict(i=4096, j=4096)),
    ("ijk,ijk->", dict(i=256, j=256, k=256)),
    ("i,j->ij", dict(i=4096, j=4096)),
    ("ijk,ikl->jl", dict(i=256, j=128, k=64, l=96)),
    ("xyz,zyw->xw", dict(x=2000, y=3, z=5, w=7)),
)


def shapes(expr: str, extents: dict) -> tuple:
    ins, out = expr.split("->")
    return [tuple(extents[m] for m in t) for t in ins.split(",")], tuple(extents[m] for m in out)


def measure(expr, extents, precision, ceilings, runs, l2_bytes):
    import cupy
    import numpy
    import torch

    import gett
    from tccg_suite.timing import median_ms, rotation_count

    ins, out = shapes(expr, extents)
    dtype = precision.dtype
    rng = cupy.random.default_rng(0)
    in_bytes = sum(int(numpy.prod(s)) for s in ins) * dtype.itemsize
    out_bytes = int(numpy.prod(out)) * dtype.itemsize
    sets = [[(rng.random(s, dtype=cupy.float32) * 2 - 1).astype(dtype) for s in ins]
            for _ in range(rotation_count(in_bytes + out_bytes, l2_bytes, limit=8))]
    flops = 2 * int(numpy.prod(list(extents.values())))
    roof_us = ceilings.roofline_ms(flops, in_bytes + out_bytes) * 1e3
    ref = cupy.einsum(expr, *[x.astype(cupy.float64) for x in sets[0]])

    def error(result):
        got = cupy.asarray(result).astype(cupy.float64)
        return float(cupy.linalg.norm((got - ref).ravel()) / (cupy.linalg.norm(ref.ravel()) or 1.0))
    torch_sets = [[torch.as_tensor(x, device="cuda") for x in s] for s in sets]
    libs = {"gett": lambda i: gett.einsum(expr, *sets[i]),
            "torch": lambda i: torch.einsum(expr, *torch_sets[i]),
            "cupy": lambda i: cupy.einsum(expr, *sets[i])}
    row = {"einsum": expr, "extents": extents, "roofline_us": roof_us}
    for name, fn in libs.items():
        try:
            first = fn(0)
            row[f"{name}_err"] = error(first)
            row[f"{name}_us"] = median_ms(fn, runs=runs, rotate=len(sets)) * 1e3
        except Exception as exc:  # noqa: BLE001 - a library that can't run a case is reported, not fatal
            row[f"{name}_err"], row[f"{name}_us"] = float("nan"), float("nan")
            row[f"{name}_failure"] = f"{type(exc).__name__}: {exc}"[:120]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=("f16", "f32"), default="f16")
    p.add_argument("--only", help="einsums of the list, separated by ';' (all of them by default)")
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args(argv)
    import cupy

    from tccg_suite import ceilings as ceil
    from tccg_suite.precision import PRECISIONS

    precision = PRECISIONS[args.dtype]
    cases = [c for c in CASES if not args.only or c[0] in args.only.split(";")]
    ceilings = ceil.measure(precision)
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    l2_bytes = props["l2CacheSize"]
    print(f"GPU: {props['name'].decode()}; {args.dtype} data ({precision.description}); ceilings: copy "
          f"{ceilings.bandwidth / 1e12:.2f} TB/s, GEMM {ceilings.peak_flops / 1e12:.1f} TFLOP/s ({ceilings.gemm_library})")
    print(f"{'einsum':<18} {'extents':<34} {'roof us':>8} {'gett us':>8} {'roof':>5} {'torch us':>9} "
          f"{'cupy us':>9} {'gett/torch':>10}  errors gett/torch/cupy")
    ratios = []
    for expr, extents in cases:
        r = measure(expr, extents, precision, ceilings, args.runs, l2_bytes)
        ratio = r["gett_us"] / r["torch_us"]
        ratios.append(ratio)
        ext = " ".join(f"{k}{v}" for k, v in extents.items())
        print(f"{expr:<18} {ext:<34} {r['roofline_us']:8.1f} {r['gett_us']:8.1f} {r['roofline_us'] / r['gett_us']:5.0%} "
              f"{r['torch_us']:9.1f} {r['cupy_us']:9.1f} {ratio:10.2f}  "
              f"{r['gett_err']:.0e}/{r['torch_err']:.0e}/{r['cupy_err']:.0e}", flush=True)
        for name in ("gett", "torch", "cupy"):
            if f"{name}_failure" in r:
                print(f"    {name} failed: {r[name + '_failure']}")
    finite = [x for x in ratios if math.isfinite(x)]
    print(f"geomean gett/torch time over {len(finite)} einsums: "
          f"{math.exp(sum(math.log(x) for x in finite) / len(finite)):.2f}; worst {max(finite):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
