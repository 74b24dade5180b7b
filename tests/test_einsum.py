"""gett.einsum, tensordot, transpose and the plan cache on the CPU: the grammar and its errors, and
numpy arrays (the reference executor) against numpy.einsum on generated expressions — ellipses,
diagonals and traces, size-1 broadcasting, strided and reversed views, 1 to 5 operands, out= with beta.
The expression strategy is shared with tests/test_gpu_einsum.py."""
import os
import subprocess
import sys
import threading

import numpy as np
import opt_einsum
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import gett
from cases import layouts, make_view
from gett.einsum import _layouts, _schedule
from gett.einsum_parse import from_sublists, parse

LABELS = "abcdefXY"   # upper case too: implicit output sorts 'X' before 'a'


# ---------------------------------------------------------------------------------------------------------
# Generated expressions
# ---------------------------------------------------------------------------------------------------------

@st.composite
def expressions(draw, max_operands=5, max_elements=300, allow_out=True):
    """(subscripts, [(shape, layout)], out (shape, layout) or None, alpha, beta) for a random einsum."""
    n = draw(st.sampled_from([1, 2, 2, 3, 3, 4, 5][:max(1, 2 * max_operands - 3)]))
    pool = draw(st.permutations(LABELS))[:draw(st.integers(2, 6))]
    extent = {m: draw(st.sampled_from((2, 3, 4, 2, 3, 1))) for m in pool}
    width = draw(st.integers(0, 2))
    ell = [draw(st.sampled_from((2, 3))) for _ in range(width)]
    terms, operands, uses_ellipsis = [], [], False
    for _ in range(n):
        term = draw(st.permutations(pool))[:draw(st.sampled_from((0, 1, 2, 2, 3, 3, 4)))]
        if term and draw(st.integers(0, 3)) == 0:   # a label twice: a diagonal or a trace
            term.insert(draw(st.integers(0, len(term))), draw(st.sampled_from(term)))
        ones = {draw(st.sampled_from(term))} if term and draw(st.integers(0, 4)) == 0 else set()
        shape = [1 if m in ones else extent[m] for m in term]   # extent 1 broadcasts against the others
        if width and draw(st.booleans()):
            w = draw(st.integers(0, width))
            at = draw(st.integers(0, len(term)))
            dims = [e if draw(st.integers(0, 3)) else 1 for e in ell[width - w:]]
            term = term[:at] + ["..."] + term[at:]
            shape = shape[:at] + dims + shape[at:]
            uses_ellipsis = True
        while int(np.prod(shape)) > max_elements:   # keep tensors small: broadcast the largest axis
            i = int(np.argmax(shape))
            shape[i] = 1
        terms.append("".join(term))
        operands.append((tuple(shape), draw(layouts(len(shape), allow_flip=True))))
    # an extent shrunk to 1 in one place must be 1 wherever that label repeats inside the same operand
    operands = [(_consistent(t, s), lay) for t, (s, lay) in zip(terms, operands)]
    used = sorted({m for t in terms for m in t if m != "."})
    explicit = draw(st.booleans())
    subscripts = ",".join(terms)
    if explicit:
        out = list(draw(st.permutations(used)))[:draw(st.integers(0, len(used)))]
        if uses_ellipsis or draw(st.booleans()):
            out.insert(draw(st.integers(0, len(out))), "...")
        subscripts += "->" + "".join(out)
    out_spec, alpha, beta = None, 1.0, 0.0
    if allow_out and draw(st.integers(0, 3)) == 0:
        shape = np.einsum(subscripts, *(np.empty(s) for s, _ in operands)).shape
        out_spec = (shape, draw(layouts(len(shape), allow_flip=False)))
        alpha, beta = draw(st.sampled_from((1.0, 2.0))), draw(st.sampled_from((0.0, 1.0, -0.5)))
    return subscripts, operands, out_spec, alpha, beta


def _consistent(term: str, shape):
    """Make the extents of a label repeated inside one term equal (the smallest of them)."""
    labels = term.replace("...", ".")
    dims = {}
    i = 0
    for c in labels:
        if c == ".":
            i += len(shape) - (len(labels) - 1)
            continue
        dims.setdefault(c, []).append(i)
        i += 1
    shape = list(shape)
    for idx in dims.values():
        low = min(shape[j] for j in idx)
        for j in idx:
            shape[j] = low
    return tuple(shape)


def build_operands(xp, rng, operands):
    """Views (strided, permuted, reversed) of fresh buffers, and their numpy twins holding the same values."""
    host, device = [], []
    for shape, layout in operands:
        perm, steps, _ = layout
        size = int(np.prod([shape[p] * steps[p] for p in perm])) if perm else 1
        values = rng.uniform(-1, 1, size)
        host.append(make_view(np, values, shape, layout))
        device.append(make_view(xp, values, shape, layout))
    return host, device


def expected(subscripts, host, out, alpha, beta):
    result = np.einsum(subscripts, *host)
    return alpha * result + (beta * out if beta else 0)


def run_expression(xp, expression, seed, to_host=np.asarray):
    """gett.einsum on arrays of ``xp`` against numpy.einsum; checks the value and, with out=, the identity."""
    subscripts, operands, out_spec, alpha, beta = expression
    rng = np.random.default_rng(seed)
    host, arrays = build_operands(xp, rng, operands)
    out, out_host = None, None
    if out_spec is not None:
        values = rng.uniform(-1, 1, int(np.prod([s * t for s, t in zip(out_spec[0], out_spec[1][1])])) or 1)
        out_host = make_view(np, values, *out_spec).copy()
        out = make_view(xp, values, *out_spec)
    got = gett.einsum(subscripts, *arrays, out=out, alpha=alpha, beta=beta)
    if out is not None:
        assert got is out
    want = expected(subscripts, host, out_host, alpha, beta)
    got = to_host(got)
    assert got.shape == np.shape(want)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * scale)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=expressions(), seed=st.integers(0, 2**32 - 1))
def test_numpy_operands_match_numpy_einsum(expression, seed):
    run_expression(np, expression, seed)


# ---------------------------------------------------------------------------------------------------------
# Grammar
# ---------------------------------------------------------------------------------------------------------

def test_parse_explicit_and_implicit_outputs():
    assert parse("ij,jk->ki", (2, 2)).output == ("k", "i")
    assert parse("ij,jk", (2, 2)).output == ("i", "k")
    assert parse("ba", (2,)).output == ("a", "b")
    assert parse("aB", (2,)).output == ("B", "a")          # numpy's order: upper case first
    assert parse("ii", (2,)).output == ()                   # a trace
    assert parse(" i j -> j i ", (2,)).inputs == (("i", "j"),)
    assert parse("->", (0,)).output == ()


def test_parse_ellipsis_lines_up_on_the_right():
    e = parse("...ij,j...->...i", (4, 2))
    assert e.inputs == (("...0", "...1", "i", "j"), ("j", "...1"))
    assert e.output == ("...0", "...1", "i")
    e = parse("i...,...", (3, 1))
    assert e.inputs == (("i", "...0", "...1"), ("...1",))
    assert parse("...ij", (2,)).inputs == (("i", "j"),)     # an ellipsis may stand for nothing
    assert parse("ij,jk->...ik", (2, 2)).output == ("i", "k")
    assert parse("...a,...b", (3, 2)).output == ("...0", "...1", "a", "b")


def test_parse_positions_point_into_the_string():
    e = parse("ab,b...c", (2, 4))
    assert e.positions == ((0, 1), (3, 4, 4, 7))


def test_sublist_form():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    assert from_sublists((a, [0, 1], b, [1, 26], [0, 26]))[0] == "AB,Ba->Aa"
    assert from_sublists((a, [Ellipsis, 1], b, [1, 2]))[0] == "...B,BC"
    assert from_sublists((a, [np.int64(51)]))[0] == "z"
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(gett.einsum(x, [0, 1], y, [1, 2], [0, 2]), x @ y)
    np.testing.assert_allclose(gett.einsum(x, [0, 1], y, [1, 2]), x @ y)
    np.testing.assert_allclose(gett.einsum(x, [Ellipsis, 1], y, [1, 2], [Ellipsis, 2]), x @ y)


@pytest.mark.parametrize("args, cls, message", [
    ((np.ones(2), [52]), ValueError, r"subscript 52 is not within the valid range \[0, 52\)"),
    ((np.ones(2), [-1]), ValueError, r"valid range"),
    ((np.ones(2), [1.5]), TypeError, r"each subscript must be either an integer or an ellipsis"),
])
def test_sublist_errors(args, cls, message):
    with pytest.raises(cls, match=message):
        gett.einsum(*args)


A, B = np.ones((2, 3)), np.ones((3, 4))

# (subscripts, operands, message) — each must raise ValueError in gett and numpy alike
MALFORMED = [
    ("i$,jk", (A, B), r"invalid subscript '\$' at position 1"),
    ("ij,jk->ik,", (A, B), r"invalid subscript ',' at position 9"),
    ("ij->i-", (A,), r"invalid subscript '-' at position 5"),
    ("ij-->i", (A,), r"does not contain proper '->'.*'-' at position 2"),
    ("ij>i", (A,), r"invalid subscript '>' at position 2"),
    ("i..j.", (A,), r"'\.' that is not part of an ellipsis \('\.\.\.'\) in operand 0: position 1"),
    ("i...j...", (A,), r"not part of an ellipsis.*position 5"),
    ("...i->..", (A,), r"not part of an ellipsis.*in the output: position 6"),
    ("ij,jk->ik", (A,), r"fewer operands provided.*1 operands, 2 terms"),
    ("ij", (A, B), r"more operands provided.*2 operands, 1 terms"),
    ("ij,,jk", (A, B), r"fewer operands provided.*3 terms"),
    ("ijk", (A,), r"too many subscripts for operand 0.*position 2"),
    ("i...->", (np.ones(()),), r"too many subscripts for operand 0.*position 0"),
    ("i", (A,), r"operand 0 has more dimensions \(2\) than subscripts.*no '\.\.\.' ellipsis"),
    ("ij,jk->ii", (A, B), r"output subscript 'i' multiple times: positions 7 and 8"),
    ("ij->x", (A,), r"output subscript 'x' which never appeared in an input: position 4"),
    ("i...->i", (A,), r"output has more dimensions.*no '\.\.\.' ellipsis"),
    ("ij,ik->jk", (A, B),
     r"subscript 'i' has extent 3 in operand 1 \(position 3.*but 2 in operand 0 \(position 0\)"),
    ("...i,...i", (np.ones((2, 3)), np.ones((5, 3))), r"axis 0 of '\.\.\.' has extent 5 in operand 1"),
    ("ii", (A,), r"dimensions in operand 0 for collapsing index 'i' don't match \(2 != 3\): position 1"),
]


@pytest.mark.parametrize("subscripts, operands, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_subscripts_raise_like_numpy(subscripts, operands, message):
    with pytest.raises(ValueError):
        np.einsum(subscripts, *operands)
    with pytest.raises(ValueError, match=message) as e:
        gett.einsum(subscripts, *operands)
    assert isinstance(e.value, gett.GettError)


def test_shape_errors_are_extent_mismatches():
    with pytest.raises(gett.ExtentMismatchError):
        gett.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 5)))


@pytest.mark.parametrize("kwargs, operands, cls, message", [
    ({"out": np.zeros((3, 3))}, (A, B), ValueError,
     r"out has shape \(3, 3\), the einsum's result has shape \(2, 4\)"),
    ({"beta": 1.0}, (A, B), ValueError, r"beta ≠ 0 .* no out="),
    ({"out": np.zeros((2, 4), np.float32)}, (A, B), TypeError, r"output dtype f32"),
    ({}, (A, B.astype(np.float32)), TypeError, r"one dtype, got f32, f64"),
    ({"op_a": abs}, (A, B, np.ones((4, 2))), ValueError, r"op_a and op_b apply"),
    ({"op_b": abs}, (A,), ValueError, r"op_a and op_b apply"),
])
def test_bad_calls(kwargs, operands, cls, message):
    subscripts = ",".join(["ij", "jk", "kl"][:len(operands)])
    with pytest.raises(cls, match=message):
        gett.einsum(subscripts, *operands, **kwargs)


def test_no_operands():
    with pytest.raises(ValueError, match="at least one operand"):
        gett.einsum("")


def test_read_only_out():
    out = np.zeros((2, 4))
    out.flags.writeable = False
    with pytest.raises(gett.OutputNotWritableError):
        gett.einsum("ij,jk", A, B, out=out)


def test_nothing_written_to_out_on_error():
    out = np.full((2, 4), 7.0)
    for bad in (dict(operands=(A, np.ones((4, 4)))), dict(operands=(A, B), out=out[:, :3])):
        with pytest.raises(ValueError):
            gett.einsum("ij,jk->ik", *bad["operands"], out=bad.get("out", out))
    assert np.all(out == 7.0)


# ---------------------------------------------------------------------------------------------------------
# Semantics
# ---------------------------------------------------------------------------------------------------------

RNG = np.random.default_rng(1)


def rand(*shape):
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij->ji", [(3, 4)]), ("ijk->", [(2, 3, 4)]), ("ii->i", [(3, 3)]), ("iij->j", [(3, 3, 2)]),
    ("i...i", [(3, 2, 3)]), ("->", [()]), (",->", [(), ()]), ("i,->i", [(3,), ()]),
    ("i,i", [(1,), (3,)]), ("ij,jk", [(2, 1), (3, 4)]), ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ab,ab,bc->ac", [(3, 4), (3, 4), (4, 2)]),
    ("ij,jk,kl,lm,mi->", [(2, 3), (3, 4), (4, 2), (2, 3), (3, 2)]), ("ii,ij,jj->j", [(3, 3)] * 3),
    ("ij,k", [(0, 3), (2,)]), ("ij,jk", [(2, 0), (0, 3)]),
])
def test_cases(subscripts, shapes):
    ops = [rand(*s) for s in shapes]
    np.testing.assert_allclose(gett.einsum(subscripts, *ops), np.einsum(subscripts, *ops), atol=1e-12)


def test_results_are_arrays_and_out_is_returned():
    r = gett.einsum("i,i", np.ones(3), np.ones(3))
    assert isinstance(r, np.ndarray) and r.shape == () and r == 3
    out = np.zeros((4, 3))[::2].T   # strided, transposed
    assert gett.einsum("ij,jk->ik", rand(3, 5), rand(5, 2), out=out) is out


def test_alpha_beta_and_op_out():
    x, y, c = rand(3, 4), rand(4, 5), rand(3, 5)
    out = c.copy()
    gett.einsum("ij,jk", x, y, out=out, alpha=2.0, beta=-0.5, op_out=lambda v: 3 * v)
    np.testing.assert_allclose(out, 3 * (2 * x @ y - 0.5 * c))
    np.testing.assert_allclose(gett.einsum("ij,jk", x, y, op_a=lambda v: 2 * v), 2 * x @ y)
    np.testing.assert_allclose(gett.einsum("ij->i", x, op_a=lambda v: v * v), (x * x).sum(1))


@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal", [(0, 2), (0, 1)],
                                      ["einsum_path", (1, 2), (0, 1)], [(0, 1, 2)], [(0,), (0, 1), (0, 1)]])
def test_paths(optimize):
    x, y, z = rand(3, 4), rand(4, 5), rand(5, 3)
    np.testing.assert_allclose(gett.einsum("ij,jk,ki->", x, y, z, optimize=optimize), np.trace(x @ y @ z))


def test_bad_path():
    with pytest.raises(ValueError, match="invalid contraction path"):
        gett.einsum("ij,jk,kl", rand(2, 3), rand(3, 4), rand(4, 5), optimize=[(0, 5)])


def test_intermediates_are_k_major_for_their_reader():
    """'ij,jk,kl->il' along ((0, 1), (0, 1)): the intermediate 'ik' is read with 'kl' → laid out [i, k]."""
    steps, labels = _schedule([("i", "j"), ("j", "k"), ("k", "l")], ("i", "l"), [(0, 1), (0, 1)])
    assert steps == [((0, 1), 4), ((2, 4), 5)]
    order = _layouts(steps, labels, ("i", "l"), 3)
    assert order[4] == ("i", "k") and order[5] == ("i", "l")
    # batch first, kept labels in the reader's output order, summed labels in the other input's order
    steps, labels = _schedule([tuple("bxy"), tuple("yb"), tuple("bzxw")], tuple("bwz"), [(0, 1), (0, 1)])
    assert _layouts(steps, labels, tuple("bwz"), 3)[4] == ("b", "x")


def test_tensordot_and_transpose():
    x, y = rand(2, 3, 4), rand(4, 3, 5)
    for axes in (1, ([1, 2], [1, 0]), (2, 0), ((-1,), (0,))):
        np.testing.assert_allclose(gett.tensordot(x, y, axes), np.tensordot(x, y, axes), atol=1e-12)
    np.testing.assert_allclose(gett.tensordot(rand(2, 3), rand(4, 5), 0).shape, (2, 3, 4, 5))
    t = gett.transpose(x, (2, 0, 1))
    assert np.shares_memory(t, x) and t.shape == (4, 2, 3)
    assert gett.transpose(x).shape == (4, 3, 2)
    with pytest.raises(ValueError, match="tensordot"):
        gett.tensordot(x, y, ([1], [0, 1]))


@pytest.mark.parametrize("subscripts, shapes", [
    ("abc,bcd,de->ae", [(2, 3, 4), (3, 4, 5), (5, 2)]),
    ("ab,ab,bc->ac", [(3, 4), (3, 4), (4, 2)]),
    ("ij,jk,kl,lm->mi", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("ii,ij->j", [(3, 3), (3, 4)]),
])
def test_opt_einsum_backend(subscripts, shapes):
    ops = [rand(*s) for s in shapes]
    got = opt_einsum.contract(subscripts, *ops, backend="gett")
    np.testing.assert_allclose(got, np.einsum(subscripts, *ops), atol=1e-12)
    out = np.zeros_like(got)
    opt_einsum.contract(subscripts, *ops, backend="gett", out=out)
    np.testing.assert_allclose(out, got)


def test_python_numbers_and_lists_go_to_numpy():
    np.testing.assert_allclose(gett.einsum("i,i", [1.0, 2.0], [3.0, 4.0]), 11.0)


def test_torch_cpu_tensors_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="CUDA device"):
        gett.einsum("i,i", torch.ones(2), torch.ones(2))


# ---------------------------------------------------------------------------------------------------------
# The plan cache
# ---------------------------------------------------------------------------------------------------------

def test_cache_hits_and_misses():
    gett.clear_cache()
    x, y = rand(3, 4), rand(4, 5)
    gett.einsum("ij,jk", x, y)
    gett.einsum("ij,jk", rand(3, 4), rand(4, 5))      # same signature: a hit
    gett.einsum("ij,jk", x.T.copy().T, y)            # other strides: a miss
    gett.einsum("ij,jk", x, y, out=np.empty((3, 5)))  # out= is part of the signature
    info = gett.cache_info()
    assert (info.hits, info.misses, info.size) == (1, 3, 3)
    gett.clear_cache()
    assert gett.cache_info() == (0, 0, 0, info.maxsize)


def test_cache_is_bounded_lru():
    from gett.plan_cache import DEFAULT_SIZE, LRUCache
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1          # "b" is now the least recently used
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    assert c.put("c", 4) == 3       # the first value stored wins
    c.resize(1)
    assert len(c) == 1 and c.get("c") == 3
    with pytest.raises(ValueError, match="cache size"):
        c.resize(-1)
    try:
        gett.set_cache_size(2)
        for n in range(2, 6):
            gett.einsum("i->", rand(n))
        assert gett.cache_info().size == 2 and gett.cache_info().maxsize == 2
    finally:
        gett.set_cache_size(DEFAULT_SIZE)


def test_cache_hits_in_a_row_keep_the_lru_order():
    """A hit on the last hit's key skips the lookup; a put, resize or clear in between ends that."""
    from gett.plan_cache import LRUCache
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1 and c.get("a") == 1   # the second by the shortcut
    c.put("b", 2)
    assert c.get("a") == 1                       # "a" is the most recent again, "b" the least
    c.put("c", 3)
    assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
    assert c.info()[:3] == (5, 1, 2)
    c.resize(1)
    assert c.get("a") is None and c.get("c") == 3
    c.resize(0)
    assert c.get("c") is None and len(c) == 0
    c.resize(1)
    c.put("d", 4)
    assert c.get("d") == 4
    c.clear()
    assert c.get("d") is None and len(c) == 0


def test_cache_size_from_environment():
    code = "import gett; print(gett.cache_info().maxsize)"
    env = dict(os.environ, GETT_PLAN_CACHE_SIZE="7")
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "7"


def test_threads_share_the_cache():
    gett.clear_cache()
    xs = [(rand(3, 4), rand(4, 5)) for _ in range(8)]
    results, errors = [None] * 8, []

    def work(i):
        try:
            for _ in range(20):
                results[i] = gett.einsum("ij,jk->ik", *xs[i])
        except Exception as e:   # surfaced below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (x, y), r in zip(xs, results):
        np.testing.assert_allclose(r, x @ y)
    assert gett.cache_info().size == 1


def test_a_captured_call_makes_its_intermediates_in_graph_memory_and_frees_each_once_read():
    """While the stream is captured into a CUDA graph (a stand-in kind says so), each intermediate comes
    from ``graph_array`` and is freed right after the step that reads it is enqueued, never before; the
    result is what numpy's einsum gives. On the GPU: tests/test_gpu_graphs.py."""
    from gett.einsum import _Program
    rng = np.random.default_rng(5)
    ops = tuple(rng.standard_normal(s) for s in ((6, 5), (5, 7), (7, 4), (4, 3)))
    program = _Program("ij,jk,kl,lm->im", ops, None, False, None, None, None, None, [(0, 1), (0, 2), (0, 1)])
    log = []

    class CapturingKind:
        @staticmethod
        def capturing(device):
            return 0x11

        @staticmethod
        def graph_array(shape, dtype, stream, device):
            number = sum(1 for e in log if e[0] == "made")
            log.append(("made", number, shape, stream))
            return np.empty(shape, dtype), lambda: log.append(("freed", number))

    def logged(step, number):
        def run(*args):
            log.append(("step", number))
            step(*args)
        return run

    program._kind = CapturingKind
    program._middle = tuple((a, b, logged(run, k), new, shape)
                            for k, (a, b, run, new, shape) in enumerate(program._middle))
    a, b, run = program._last
    program._last = (a, b, logged(run, len(program._middle)))
    result = program(ops, None, 1.0, 0.0)
    np.testing.assert_allclose(result, np.einsum("ij,jk,kl,lm->im", *ops), rtol=1e-12)
    assert log == [("made", 0, (6, 7), 0x11), ("step", 0),
                   ("made", 1, (6, 4), 0x11), ("step", 1), ("freed", 0),
                   ("step", 2), ("freed", 1)]
