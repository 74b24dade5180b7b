"""#14's shape in small, for the GPU tests of a plan's launches (test_gpu_chain.py, test_gpu_graphs.py): A
"kmj" and B "jkn", each with its first mode fastest, disagree on K's stride-1 mode, so A can be staged."""
import pytest

import gett

K1, K2, M, N = 64, 96, 40, 50
SUBSCRIPTS = "kmj,jkn->mn"
SHAPES = (K2, M, K1), (N, K1, K2), (N, M)   # row-major, as layouts() takes them


def layouts(A, B, D, transpose):
    """A (k, m, j), B (j, k, n) and D (m, n) seen with their first mode fastest: ``A``, ``B``, ``D`` are
    row-major arrays of the reversed shapes (``SHAPES``), ``transpose(x, axes)`` the library's."""
    return transpose(A, (2, 1, 0)), transpose(B, (2, 1, 0)), transpose(D, (1, 0))


def chain_every_plan(cupy, monkeypatch):
    """Launch even these small plans' kernels behind one another; skip where the device can't (< sm_90)."""
    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("programmatic dependent launch needs sm_90")
    monkeypatch.setattr("gett.launch.CHAIN_MIN_SECONDS", 0.0)


def plan(A, B, D, staging, tile, **options):
    """The plan of D = A·B, staged or not, with ``tile`` (math, bm, bn, bk, stages, split_k) warp-
    specialised, or None for the heuristic's."""
    from gett.config import KernelConfig
    config = None if tile is None else KernelConfig(*tile[:5], split_k=tile[5], ws=True)
    return gett.plan_contraction(A, "kmj", B, "jkn", D, "mn", beta=0, staging=staging, config=config, **options)
