"""Random contractions for property-based tests: modes of every class, awkward extents, and tensors
that are permuted, strided, reversed views of larger buffers. Shared by the CPU and GPU suites."""
from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

EXTENTS = (1, 2, 3, 5, 7, 8, 13, 16, 17, 24, 31, 37, 64, 67)


@dataclass
class Case:
    modes_A: str
    modes_B: str
    modes_C: str
    extents: dict
    layouts: dict      # tensor -> (memory order permutation, steps, flips)
    dtype: str
    out_dtype: str
    broadcast: tuple
    alpha: float
    beta: float

    def shape(self, t):
        return tuple(self.extents[m] for m in getattr(self, f"modes_{t}"))

    def einsum(self):
        return f"{self.modes_A},{self.modes_B}->{self.modes_C}"


def make_view(xp, base_values, shape, layout):
    """A view of logical ``shape`` over a fresh buffer laid out by ``layout`` = (perm, steps, flips).

    The buffer holds ``base_values`` (one value per buffer element), so numpy and CuPy views built
    from the same values hold the same logical tensor."""
    perm, steps, flips = layout
    buf_shape = tuple(shape[p] * steps[p] for p in perm)
    buf = xp.asarray(base_values.reshape(buf_shape))
    if not perm:
        return buf   # a 0-d tensor: indexing with () would give a scalar
    view = buf[tuple(slice(None, None, -s if f else s) for s, f in
                     zip((steps[p] for p in perm), (flips[p] for p in perm)))]
    axes = tuple(int(i) for i in np.argsort(perm))
    return view.permute(*axes) if hasattr(view, "permute") else view.transpose(axes)


def buffer_size(shape, layout):
    perm, steps, _ = layout
    n = 1
    for p in perm:
        n *= shape[p] * steps[p]
    return n


@st.composite
def layouts(draw, ndim, allow_flip):
    perm = tuple(draw(st.permutations(range(ndim))))
    steps = tuple(draw(st.sampled_from((1, 1, 1, 2))) for _ in range(ndim))
    flips = tuple(draw(st.booleans()) if allow_flip else False for _ in range(ndim))
    return perm, steps, flips


@st.composite
def contractions(draw, dtypes=("f32", "f64", "c128", "i64"), max_elements=6000, max_modes=6,
                 special_modes=True, out_dtypes=None):
    """A random contraction with M, N, K, L modes, optionally modes summed in one input only and
    broadcast modes; each tensor at most ``max_elements`` elements."""
    counts = {c: draw(st.integers(0, 2)) for c in "MNKL"}
    extra = {"a": draw(st.integers(0, 1)) if special_modes else 0,
             "b": draw(st.integers(0, 1)) if special_modes else 0,
             "c": draw(st.integers(0, 1)) if special_modes else 0}
    labels = iter(string.ascii_letters)
    cls = {}
    for c, n in list(counts.items()) + list(extra.items()):
        for _ in range(n):
            cls[next(labels)] = c
    if len(cls) > max_modes:
        cls = dict(list(cls.items())[:max_modes])
    extents = {m: draw(st.sampled_from(EXTENTS)) for m in cls}
    members = {"A": [m for m, c in cls.items() if c in "MKLa"],
               "B": [m for m, c in cls.items() if c in "NKLb"],
               "C": [m for m, c in cls.items() if c in "MNLc"]}

    def size(ms):
        n = 1
        for m in ms:
            n *= extents[m]
        return n
    for t in "ABC":   # shrink extents until every tensor fits
        while size(members[t]) > max_elements:
            big = max(members[t], key=lambda m: extents[m])
            extents[big] = max(1, extents[big] // 3)
    modes = {t: "".join(draw(st.permutations(members[t]))) for t in "ABC"}
    lay = {t: draw(layouts(len(modes[t]), allow_flip=(t != "C"))) for t in "ABC"}
    dtype = draw(st.sampled_from(dtypes))
    out = draw(st.sampled_from(out_dtypes[dtype])) if out_dtypes else dtype
    beta = draw(st.sampled_from((0.0, 0.0, 1.0, -0.5)))
    alpha = draw(st.sampled_from((1.0, 1.0, 2.0, -0.75)))
    return Case(modes["A"], modes["B"], modes["C"], extents, lay, dtype, out,
                tuple(m for m, c in cls.items() if c == "c"), alpha, beta)


NUMPY_DTYPE = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "c64": np.complex64,
               "c128": np.complex128, "i32": np.int32, "i64": np.int64}


def random_values(rng, n, dtype):
    """Random values that are never all zero; small integers so integer results stay exact."""
    if dtype in ("i32", "i64"):
        return rng.integers(-5, 6, size=n).astype(NUMPY_DTYPE[dtype])
    v = rng.uniform(-1, 1, size=n)
    if dtype in ("c64", "c128"):
        v = v + 1j * rng.uniform(-1, 1, size=n)
    return v.astype(NUMPY_DTYPE[dtype]) if dtype != "bf16" else v.astype(np.float32)


def build_host_arrays(case, rng):
    """Numpy views (A, B, C) for ``case`` plus the flat buffers they were made from."""
    out = {}
    for t in "ABC":
        dt = case.dtype if t != "C" else case.out_dtype
        shape = case.shape(t)
        vals = random_values(rng, buffer_size(shape, case.layouts[t]), dt)
        out[t] = (make_view(np, vals, shape, case.layouts[t]), vals)
    return out


def oracle(case, A, B, C):
    """numpy.einsum in float64 / complex128 / int64 — independent of gett's tables."""
    wide = np.complex128 if case.dtype.startswith("c") else (np.int64 if case.dtype.startswith("i") else np.float64)
    shapeC = case.shape("C")
    a, b = A.astype(wide), B.astype(wide)
    # modes in C only (broadcast) are not in the einsum inputs: compute without them, then broadcast
    c_modes = "".join(m for m in case.modes_C if m not in case.broadcast)
    r = np.einsum(f"{case.modes_A},{case.modes_B}->{c_modes}", a, b)
    r = np.expand_dims(r, [i for i, m in enumerate(case.modes_C) if m in case.broadcast]) if case.broadcast else r
    r = np.broadcast_to(r, shapeC)
    out = case.alpha * r if not case.dtype.startswith("i") else (int(case.alpha) * r)
    if case.beta != 0:
        out = out + (case.beta if not case.dtype.startswith("i") else int(case.beta)) * C.astype(wide)
    return out
