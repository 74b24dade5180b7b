"""#14 ab-cad-dcb (f16) as M chunks: the rows a of A and D cut in n pieces, each piece one staged plan
(A's piece copied K-major, then contracted with all of B), so that each piece's copy A' (57.6 MB / n) can
still be in L2 when its contraction reads it, at the price of reading B n times. Two buffer sets in turn
(230 MB > L2). Prints us per whole contraction (median, CUDA events) and the error against float64.
Usage (repository root): python3 benchmarks/probes/m_chunks_14.py [n ...]. Session 61: 2 pieces 121.6 us at best,
3 pieces 143.0, against 95.0 for the single plan (H100; results/m_chunks_f16_14_session61.txt)."""
import sys

import cupy
import numpy

sys.path.insert(0, ".")
sys.path.insert(0, "benchmarks")
import gett  # noqa: E402
from tccg_suite.timing import median_ms  # noqa: E402
from tile_sweep import parse_config  # noqa: E402

a, b, c, d = 312, 296, 312, 312
rng = cupy.random.default_rng(1)
sets = []
for _ in range(2):
    A = cupy.asfortranarray(rng.standard_normal((c, a, d), dtype=cupy.float32).astype(cupy.float16))
    B = cupy.asfortranarray(rng.standard_normal((d, c, b), dtype=cupy.float32).astype(cupy.float16))
    D = cupy.zeros((a, b), dtype=cupy.float16, order="F")
    sets.append((A, B, D))
A, B, D = sets[0]
ref = cupy.einsum("cad,dcb->ab", A.astype(cupy.float64), B.astype(cupy.float64))


def err():
    return float(cupy.abs(D.astype(cupy.float64) - ref).max() / cupy.abs(ref).max())


full = gett.plan_contraction(A, "cad", B, "dcb", D, "ab", beta=0)
print("single plan:", full.kernel().config.key(), [s.tensor for s in full.staging], flush=True)
D.fill(numpy.nan)
gett.contract(full, 1.0, A, B, 0.0, D, D)
print(f"  err {err():.2e}", flush=True)
for rnd in range(2):
    t = median_ms(lambda i: gett.contract(full, 1.0, sets[i][0], sets[i][1], 0.0, sets[i][2], sets[i][2]),
                  runs=40, rotate=2)
    print(f"single plan round {rnd}: {t * 1e3:.1f} us", flush=True)

CONFIGS = [None] + [parse_config(x) for x in ("wgmma:64x160x64:s8:k13:ws", "wgmma:64x160x64:s8:k22:ws",
                                              "wgmma:64x160x64:s8:k26:ws", "wgmma:128x160x64:s4:k22:ws",
                                              "wgmma:128x160x64:s4:k44:ws")]
for n in [int(x) for x in sys.argv[1:]] or [2, 3]:
    cuts = [round(j * a / n) for j in range(n + 1)]
    for cfg in CONFIGS:
        try:
            plans = [gett.plan_contraction(A[:, cuts[j]:cuts[j + 1]], "cad", B, "dcb", D[cuts[j]:cuts[j + 1]], "ab",
                                           beta=0, config=cfg) for j in range(n)]
        except Exception as e:  # noqa: BLE001 - a configuration that does not fit is reported
            print(f"{n} chunks {cfg.key() if cfg else 'planner'}: {type(e).__name__}: {e}", flush=True)
            continue

        def run(i):
            A, B, D = sets[i]
            for j, p in enumerate(plans):
                s = slice(cuts[j], cuts[j + 1])
                gett.contract(p, 1.0, A[:, s], B, 0.0, D[s], D[s])
        D.fill(numpy.nan)
        run(0)
        e = err()
        ts = [median_ms(run, runs=40, rotate=2) for _ in range(2)]
        k = plans[0].staged_plan.kernel().config.key() if plans[0].staged_plan else plans[0].kernel().config.key()
        print(f"{n} chunks {cfg.key() if cfg else 'planner'}: {ts[0] * 1e3:.1f} / {ts[1] * 1e3:.1f} us, err {e:.2e}; "
              f"kernel {k}, staged {[s.tensor for s in plans[0].staging]}", flush=True)
