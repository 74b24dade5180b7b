"""f32 SIMT GEMMs with an operand contiguous along K, staging off / auto / forced: time, TFLOP/s and error against
float64 (session 53; `--compile-only` compiles every plan ahead for sm_90, `--small` 1024-1536 only)."""
import sys, statistics
import cupy, numpy
import gett
from tccg_suite.timing import median_ms, rotation_count

def rm_arrays(shape_a, shape_b, shape_c, sets):
    rng = cupy.random.default_rng(0)
    return [[rng.random(s, dtype=cupy.float32) * 2 - 1 for s in (shape_a, shape_b, shape_c)] for _ in range(sets)]

def case(ma, mb, ext, semiring=False, compile_only=False):
    sh = lambda m: tuple(ext[x] for x in m)
    if compile_only:
        d = lambda m: gett.TensorDescriptor(sh(m), tuple(int(numpy.prod(sh(m)[i+1:])) for i in range(len(m))), "float32")
        A, B, C = d(ma), d(mb), d("ij")
    flops = 2 * ext["i"] * ext["j"] * ext["k"]
    out = []
    for staging in (False, None, True):
        kw = dict(op_ab=lambda a, b: a + b, reduce=(max, float("-inf"))) if semiring else {}
        if compile_only:
            p = gett.plan_contraction(A, ma, B, mb, C, "ij", beta=0, staging=staging, device_arch="sm_90", **kw)
            for q in (p, p.staged_plan):
                if q is not None: q.kernel("sm_90")
            if p.staging: p.copy_kernels("sm_90")
            out.append(f"{staging}:{len(p.staging)}")
            continue
        nbytes = 4 * (ext["i"] * ext["k"] * 2 + ext["i"] * ext["j"])
        sets = rm_arrays(sh(ma), sh(mb), sh("ij"), rotation_count(nbytes, 50 << 20, limit=4))
        p = gett.plan_contraction(sets[0][0], ma, sets[0][1], mb, sets[0][2], "ij", beta=0, staging=staging, **kw)
        def run(i):
            a, b, c = sets[i]
            gett.contract(p, 1.0, a, b, 0.0, c, c)
        c = sets[0][2]; c.fill(float("nan")); run(0)
        if semiring:   # ki,jk: D[i,j] = max_k A[k,i] + B[j,k], in chunks of k
            a, b = sets[0][0], sets[0][1]
            ref = cupy.full((a.shape[1], b.shape[0]), -cupy.inf, dtype=cupy.float32)
            for k0 in range(0, a.shape[0], 32):
                ref = cupy.maximum(ref, (a[k0:k0 + 32, :, None] + b[:, k0:k0 + 32].T[:, None, :]).max(axis=0))
            err = float(cupy.abs(c - ref).max() / cupy.abs(ref).max())
        else:
            ref = cupy.einsum(f"{ma},{mb}->ij", sets[0][0].astype(cupy.float64), sets[0][1].astype(cupy.float64))
            err = float(cupy.abs(c - ref).max() / cupy.abs(ref).max())
        ms = median_ms(run, runs=20, warmup=3, rotate=len(sets))
        out.append(f"staging={staging!s:5} copies={len(p.staging)} {ms*1e3:9.1f} us {flops/ms/1e9:6.1f} TF err {err:.1e}")
    return out

if __name__ == "__main__":
    co = "--compile-only" in sys.argv
    sizes = (1024, 1280, 1536) if "--small" in sys.argv else (1024, 1536, 2048, 3072, 4096)
    for n in sizes:
        for ma, mb in (("ik", "kj"), ("ik", "jk"), ("ki", "kj")):
            ext = dict(i=n, j=n, k=n)
            print(n, ma, mb, *case(ma, mb, ext, compile_only=co), sep="\n  " if not co else " ", flush=True)
    print(2048, "max-plus ki,jk", *case("ki", "jk", dict(i=2048, j=2048, k=2048), semiring=True, compile_only=co), sep="\n  " if not co else " ", flush=True)
