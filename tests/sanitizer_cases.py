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
    return 0


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
        try:
            _, got, expect = run_case(case, None, seed, KernelConfig("wgmma", *tile, 64, 3))
        except ValueError as e:   # an MN-major B comes in whole 64-column swizzle atoms
            assert "MN-major" in str(e) and tile[1] % 64
            _, got, expect = run_case(case, None, seed, KernelConfig("wgmma", tile[0], 128, 64, 3))
        check(case, got, expect, 2e-3)
        ran.append(tile)
    one()
    # TCCG #28's pattern: A's strided vectors land as whole chunks and are transposed in shared memory
    test_wgmma_box_tiled_tccg_shapes("abcd-eafb-fdec")
    return len(ran)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60))
