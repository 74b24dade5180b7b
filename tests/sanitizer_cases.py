"""Run generated contractions once each, for compute-sanitizer (memcheck, racecheck).

Usage: ``compute-sanitizer --tool memcheck --error-exitcode 1 python3 tests/sanitizer_cases.py [N]``.
Deterministic: the same N contractions every run, spread over every dtype path, with odd extents and
strided, permuted and reversed views. Each result is also checked against numpy in float64.
"""
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

from cases import contractions
from test_gpu_kernels import PATHS, WGMMA_TILES, check, cp, run_case, test_wgmma_box_tiled_tccg_shapes

WGMMA_CASES = 8   # extra f16 contractions through wgmma kernels on an sm_90 GPU


def main(count: int) -> int:
    paths = list(PATHS)
    done = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data(), seed=st.integers(0, 2**31))
    def one(data, seed):
        index = len(done) % len(paths)   # round robin: every dtype path gets its share
        dtype, out, compute = paths[index]
        case = data.draw(contractions(dtypes=(dtype,), out_dtypes={dtype: (out,)}, max_elements=4000))
        if dtype == "bf16":   # torch views cannot have negative steps
            case.layouts = {t: (p, s, tuple(False for _ in f)) for t, (p, s, f) in case.layouts.items()}
        if dtype[0] == "i":
            case.alpha, case.beta = float(int(case.alpha) or 1), float(int(case.beta))
        _, got, expect = run_case(case, compute, seed)
        check(case, got, expect, PATHS[paths[index]])
        done.append(paths[index])
    one()
    print(f"{len(done)} contractions ran: " + ", ".join(
        f"{'-'.join(x or 'default' for x in p)}×{done.count(p)}" for p in paths if p in done))
    if cp.cuda.Device().compute_capability == "90":
        print(f"wgmma×{run_wgmma(WGMMA_CASES)}")
        print(f"persistent×{run_persistent()}")
    return 0


def run_persistent() -> int:
    """Producers over several tiles (kernels/gett.cuh run_tiles_ws), whose math warps and producer pass the
    epilogue tile between them: wgmma (TMA loads) and SIMT f32 (cp.async; D stored through the TMA where its
    tile is a box), beta 0 and 0.5, more tiles than CTAs, against numpy in float64."""
    import numpy as np

    import gett
    from gett.config import KernelConfig
    cases = [("f16", KernelConfig("wgmma", 128, 128, 64, 4, ws=True, persistent=True), (2000, 2200, 200), 0.0),
             ("f16", KernelConfig("wgmma", 128, 128, 64, 3, ws=True, persistent=True), (2000, 2200, 200), 0.5),
             ("f32", KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True, persistent=True), (1700, 1900, 20), 0.5),
             # D's tile one box of D: stored through the TMA (gett.tma.store_box)
             ("f32", KernelConfig("simt", 128, 128, 24, 4, tm=8, tn=8, ws=True, persistent=True), (1536, 1920, 20), 0.0)]
    rng = np.random.default_rng(31)
    for dtype, config, (m, n, k), beta in cases:
        a, b, c = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n)), rng.uniform(-1, 1, (m, n))
        host = np.float16 if dtype == "f16" else np.float32
        A, B, C = (cp.asarray(x.astype(host)) for x in (a, b, c))
        D = cp.full((m, n), np.nan, dtype=host)
        plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D, beta=beta, config=config)
        assert plan.kernel().config == config
        gett.contract(plan, 1.0, A, B, beta, C, D)
        a, b, c = (cp.asnumpy(x).astype(np.float64) for x in (A, B, C))
        got, expect = cp.asnumpy(D).astype(np.float64), a @ b + beta * c
        assert np.all(np.isfinite(got)), f"{config.key()}: {np.sum(~np.isfinite(got))} outputs not written"
        err = np.linalg.norm(got - expect) / np.linalg.norm(expect)
        assert err < (2e-3 if dtype == "f16" else 1e-5), f"{config.key()}: relative error {err:.2e}"
    return len(cases)


def run_wgmma(count: int) -> int:
    """Generated f16 contractions through each wgmma tile (swizzled shared tiles, async proxy fences)."""
    from gett.config import KernelConfig
    ran = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=contractions(dtypes=("f16",), out_dtypes={"f16": ("f32",)}, max_elements=20000),
           seed=st.integers(0, 2**31))
    def one(case, seed):
        tile = WGMMA_TILES[len(ran) % len(WGMMA_TILES)]
        _, got, expect = run_case(case, None, seed, KernelConfig("wgmma", *tile, 64, 3))
        check(case, got, expect, 2e-3)
        ran.append(tile)
    one()
    # TCCG #28's pattern: A's strided vectors land as whole chunks and are transposed in shared memory
    test_wgmma_box_tiled_tccg_shapes("abcd-eafb-fdec")
    return len(ran)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60))
