"""gett.expr: Python lambdas -> expression trees -> CUDA (compiled with NVRTC) and numpy.

CPU only, except test_cuda_matches_numpy_on_gpu (marked gpu), which runs every case on a device.
"""

from __future__ import annotations

import functools
import math
import math as m
import re
from math import exp as math_exp
from pathlib import Path

import numpy as np
import numpy as xp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gett import nvrtc, ops
from gett.errors import DTypeError, UnsupportedOperation
from gett.expr import COMPUTE_TYPES, Expr, is_identity, translate

KERNELS = str(Path(__file__).resolve().parents[1] / "kernels")
HERE = __file__

SCALE = 2.5  # a global captured by some lambdas below
HALF32 = np.float32(0.5)
THREE64 = np.int64(3)


def _scaled(s):
    return lambda x: x * s


# ---- cases: (function, arity); each list is used for compiling, numpy-vs-Python and GPU tests ----

FLOAT_CASES = [
    (lambda x: x, 1),
    (lambda x: -x + 1.5, 1),
    (lambda x: +x * 2 - 3, 1),
    (lambda x: x / 3, 1),
    (lambda x: x // 0.75, 1),
    (lambda x: x // -2.5, 1),
    (lambda x: x % -2.5, 1),
    (lambda x: (-x) % 3, 1),
    (lambda x: x ** 2, 1),
    (lambda x: x ** 3, 1),
    (lambda x: x ** 4, 1),
    (lambda x: x ** -1, 1),
    (lambda x: x ** 0, 1),
    (lambda x: x ** 1.0, 1),
    (lambda x: x ** 2.5, 1),
    (lambda x: pow(x, 0.5), 1),
    (lambda x: math.pow(x, 3), 1),
    (lambda x: np.power(x, -2), 1),
    (lambda x: abs(x) + math.fabs(x) + np.abs(x), 1),
    (lambda x: min(x, 1.0), 1),
    (lambda x: max(x, -1, 0.5), 1),
    (lambda x: np.maximum(x, 0.5), 1),
    (lambda x: np.minimum(0.5, x), 1),
    (lambda x: np.clip(x, -1, 1), 1),
    (lambda x: np.sign(x), 1),
    (lambda x: math.exp(x), 1),
    (lambda x: np.exp(x) + math_exp(x), 1),
    (lambda x: math.expm1(x), 1),
    (lambda x: math.log(x), 1),
    (lambda x: np.log1p(x), 1),
    (lambda x: math.sqrt(x), 1),
    (lambda x: math.sin(x) + m.cos(x), 1),
    (lambda x: xp.tan(x), 1),
    (lambda x: math.tanh(x), 1),
    (lambda x: np.sinh(x) * np.cosh(x), 1),
    (lambda x: math.erf(x), 1),
    (lambda x: math.floor(x) + np.ceil(x), 1),
    (lambda x: 1.0 if x > 0 else -1.0, 1),
    (lambda x: 0 < x < 1, 1),
    (lambda x: x >= -1 and x <= 2, 1),
    (lambda x: x < -1 or x > 1 or x == 0, 1),
    (lambda x: not x > 0, 1),
    (lambda x: not x, 1),
    (lambda x: (x > 0) * x + True, 1),
    (lambda x: x != x, 1),
    (lambda x: np.where(x > 0, x, 0.1 * x), 1),
    (lambda x: np.where(x, 1, 2), 1),
    (lambda x: np.isnan(x) or math.isnan(x + 1), 1),
    (lambda x: math.pi * x + math.e - np.pi, 1),
    (lambda x: max(x, -math.inf) + min(0, np.inf), 1),
    (lambda x: x * SCALE + HALF32 * THREE64, 1),
    (lambda x: x if x > 0 else 1e30 * x, 1),
    (_scaled(0.1), 1),
    (ops.identity, 1),
    (ops.neg, 1),
    (ops.relu, 1),
    (ops.leaky_relu(0.2), 1),
    (ops.elu(), 1),
    (ops.gelu_tanh, 1),
    (ops.sigmoid, 1),
    (ops.tanh, 1),
    (lambda x: 2 * ops.relu(x) - ops.sigmoid(x) + ops.gelu_tanh(1 - x), 1),
    (lambda x, y: x * y + 1, 2),
    (lambda x, y: x / y - y, 2),
    (lambda x, y: x // y, 2),
    (lambda x, y: x % y, 2),
    (lambda x, y: x ** y, 2),
    (lambda x, y: max(x, y), 2),
    (lambda x, y: min(y, x), 2),
    (lambda x, y: np.maximum(x, y) + np.minimum(x, y), 2),
    (lambda x, y: x if x > y else y, 2),
    (lambda x, y: (x == y) + (x != y) * 2, 2),
    (lambda x, y: np.clip(x, -abs(y), abs(y)), 2),
    (np.maximum, 2),
    (ops.MAX_PLUS.multiply, 2),
    (ops.MIN_PLUS.add, 2),
]

INT_CASES = [
    (lambda x: x, 1),
    (lambda x: x + 1, 1),
    (lambda x: 3 * x - 7, 1),
    (lambda x: -x, 1),
    (lambda x: x // 3, 1),
    (lambda x: x // -3, 1),
    (lambda x: x % 4, 1),
    (lambda x: x % -4, 1),
    (lambda x: x ** 2, 1),
    (lambda x: x ** 3 - x ** 4, 1),
    (lambda x: x ** 0, 1),
    (lambda x: x ** -1, 1),
    (lambda x: abs(x), 1),
    (lambda x: max(x, 0), 1),
    (lambda x: min(x, 5, -5), 1),
    (lambda x: np.maximum(x, 2) + np.minimum(x, -2), 1),
    (lambda x: np.clip(x, -3, 3), 1),
    (lambda x: np.sign(x), 1),
    (lambda x: x if x > 0 else -x, 1),
    (lambda x: (x > 0) + (x < 5), 1),
    (lambda x: x == 3, 1),
    (lambda x: not x, 1),
    (lambda x: 0 < x < 10 and x != 5, 1),
    (lambda x: np.where(x % 2 == 0, x // 2, 3 * x + 1), 1),
    (lambda x: np.isnan(x), 1),
    (lambda x: x * THREE64 + True, 1),
    (ops.relu, 1),
    (ops.neg, 1),
    (lambda x, y: x // y, 2),
    (lambda x, y: x % y, 2),
    (lambda x, y: x * y - y, 2),
    (lambda x, y: x ** y, 2),
    (lambda x, y: pow(x, y), 2),
    (lambda x, y: max(x, y), 2),
    (lambda x, y: x if x < y else y, 2),
    (lambda x, y: x > y or y == 0, 2),
    (ops.PLUS_TIMES.add, 2),
    (ops.MAX_TIMES.multiply, 2),
]

COMPLEX_CASES = [
    (lambda z: z, 1),
    (lambda z: z * z + 1, 1),
    (lambda z: z / (1 + 2j), 1),
    (lambda z: 2 * z - 1j, 1),
    (lambda z: z ** 2 + z ** 3 - z ** 4, 1),
    (lambda z: z ** -1, 1),
    (lambda z: z ** 0 - z ** 1, 1),
    (lambda z: -z, 1),
    (lambda z: abs(z), 1),
    (lambda z: np.conj(z) * np.real(z) + np.imag(z), 1),
    (lambda z: np.exp(z), 1),
    (lambda z: np.log(z), 1),
    (lambda z: np.sqrt(z), 1),
    (lambda z: z == 1, 1),
    (lambda z: z if z != 0 else 1j, 1),
    (lambda z: np.where(np.isnan(z), 0, z), 1),
    (ops.conj, 1),
    (ops.exp, 1),
    (lambda z, w: z * w + 1, 2),
    (lambda z, w: z / w, 2),
    (lambda z, w: z - w * 2j, 2),
    (ops.PLUS_TIMES.multiply, 2),
]

CASES_BY_KIND = {"f": FLOAT_CASES, "i": INT_CASES, "c": COMPLEX_CASES}
_CTYPES_BY_KIND = {"f": ("float", "double"), "i": ("int", "long long"),
                   "c": ("gett::complex<float>", "gett::complex<double>")}


@functools.lru_cache(maxsize=None)
def _exprs(kind: str) -> tuple[Expr, ...]:
    return tuple(translate(fn, arity) for fn, arity in CASES_BY_KIND[kind])


def _translation_unit(kind: str, ctype: str, exclude: str = "^$") -> str:
    """Every case of ``kind`` (but those whose key matches ``exclude``) as f<i>, and one kernel
    writing f<i>(x[t], y[t]) to out[i * n + t]."""
    exprs = [e for e in _exprs(kind) if not re.search(exclude, e.key)]
    calls = "\n".join(f"    out[{i} * n + t] = f{i}({'x[t], y[t]' if e.arity == 2 else 'x[t]'});"
                      for i, e in enumerate(exprs))
    return ('#include "elementwise.cuh"\n'
            + "".join(e.render_cuda(f"f{i}", ctype) for i, e in enumerate(exprs))
            + f'extern "C" __global__ void cases({ctype}* out, const {ctype}* x, const {ctype}* y, int n) {{\n'
            f"    int t = blockIdx.x * blockDim.x + threadIdx.x;\n    if (t >= n) return;\n{calls}\n}}\n")


TRANSLATION_UNITS = [(kind, ctype) for kind, ctypes in _CTYPES_BY_KIND.items() for ctype in ctypes]


# ---- rendering and compiling ----------------------------------------------------------------------

@pytest.mark.parametrize("kind, ctype", TRANSLATION_UNITS)
def test_every_case_compiles(kind, ctype):
    result = nvrtc.compile_cubin(_translation_unit(kind, ctype), arch="sm_90", include_dirs=[KERNELS])
    assert result.cubin


def test_f32_cases_have_no_f64_instructions():
    # CUDA's own sinf/cosf/tanf use one f64 multiply in their |x| > 105615 argument reduction
    trig = r"\((sin|cos|tan) "
    ptx = nvrtc.compile_ptx(_translation_unit("f", "float", exclude=trig), arch="sm_90", include_dirs=[KERNELS])
    assert ".f64" not in ptx


def test_gelu_f32_ptx_has_no_f64():
    gelu = translate(lambda x: 0.5 * x * (1 + math.tanh(0.79788456 * (x + 0.044715 * x**3))))
    source = ('#include "elementwise.cuh"\n' + gelu.render_cuda("gelu", "float")
              + 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = gelu(p[threadIdx.x]); }\n')
    ptx = nvrtc.compile_ptx(source, arch="sm_90", include_dirs=[KERNELS])
    assert "tanh" in gelu.key and "cube" in gelu.key
    assert ".f64" not in ptx and ".f32" in ptx


def test_headers_are_self_contained():
    for header in ("complex.cuh", "elementwise.cuh"):
        source = f'#include "{header}"\n#include "{header}"\nextern "C" __global__ void k() {{}}\n'
        assert nvrtc.compile_cubin(source, arch="sm_90", include_dirs=[KERNELS]).cubin


def test_render_shape_and_literals():
    e = translate(lambda a, b: a * 0.5 + b - 2, 2)
    assert e.render_cuda("f", "float") == (
        "__device__ __forceinline__ float f(float x, float y) {\n    return (((x * 0.5f) + y) - 2.0f);\n}\n")
    assert "(((x * 0.5) + y) - 2.0)" in e.render_cuda("f", "double")
    assert "(((x * 0LL) + y) - 2LL)" in e.render_cuda("f", "long long")
    assert "gett::complex<float>(0.5f, 0.0f)" in e.render_cuda("f", "gett::complex<float>")
    assert "static_cast<int>((x > 0))" in translate(lambda x: x > 0).render_cuda("f", "int")
    assert "(-2147483647 - 1)" in translate(lambda x: x + -2147483648).render_cuda("f", "int")
    assert "(-__int_as_float(0x7f800000))" in translate(lambda x: max(x, -math.inf)).render_cuda("f", "float")
    assert "(x ? " not in translate(lambda x: 1 if x else 0).render_cuda("f", "float")  # conditions are explicit
    with pytest.raises(DTypeError, match="unknown compute type"):
        e.render_cuda("f", "half")


def test_small_integer_powers_are_multiplications():
    for n, fn in ((2, "square"), (3, "cube"), (4, "pow4"), (-1, "recip")):
        assert f"gett::fn::{fn}(x)" in translate(lambda x: x ** n).render_cuda("f", "float")
    assert translate(lambda x: x ** 1).render_cuda("f", "float").count("return x;") == 1
    assert "gett::fn::pow(x, 5.0f)" in translate(lambda x: x ** 5).render_cuda("f", "float")


# ---- numpy evaluation against Python ----------------------------------------------------------------

SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, math.nan, math.inf, -math.inf]
_floats = st.one_of(st.floats(-1e3, 1e3), st.sampled_from(SPECIAL_FLOATS))
_ints = st.one_of(st.integers(-1000, 1000), st.sampled_from([0, 1, -1, 2, -2]))
# no subnormal parts: dividing by one overflows numpy's complex division (nan) where Python gives 0j
_part = st.floats(-20, 20, allow_subnormal=False)
_complexes = st.builds(complex, _part, _part) | st.sampled_from([0j, 1 + 0j, -4 + 0j, 1j])


def _python(fn, args, to):
    """fn on Python scalars, converted with ``to``; None where Python raises (numpy gives inf/nan there)."""
    try:
        with np.errstate(all="ignore"):
            result = fn(*args)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return to(result.item() if isinstance(result, np.generic | np.ndarray) else result)


def _as_float(v):
    return math.nan if isinstance(v, complex) else float(v)  # (-8) ** 0.5 is complex in Python, NaN in C


def _check_against_python(kind, index, data, strategy, dtype, to, compare):
    fn, arity = CASES_BY_KIND[kind][index]
    expr = _exprs(kind)[index]
    rows = data.draw(st.lists(st.tuples(*[strategy] * arity), min_size=1, max_size=8))
    got = expr.evaluate(*[np.array([r[i] for r in rows], dtype) for i in range(arity)])
    assert got.dtype == dtype and got.shape == (len(rows),)
    for row, value in zip(rows, got):
        expected = _python(fn, row, to)
        if expected is not None:
            compare(value, expected, row)


def _close(rtol, atol):
    def compare(value, expected, row):
        assert np.isclose(value, expected, rtol=rtol, atol=atol, equal_nan=True), (row, value, expected)
    return compare


def _equal(value, expected, row):
    assert value == expected, (row, value, expected)


@pytest.mark.parametrize("index", range(len(FLOAT_CASES)))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_float64_evaluate_matches_python(index, data):
    _check_against_python("f", index, data, _floats, np.float64, _as_float, _close(1e-9, 1e-12))


@pytest.mark.parametrize("index", range(len(INT_CASES)))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_int64_evaluate_matches_python(index, data):
    # x ** -1 is a float in Python, truncated toward zero by the kernels; int64 wraps around
    _check_against_python("i", index, data, _ints, np.int64, lambda v: (int(v) + 2**63) % 2**64 - 2**63, _equal)


@pytest.mark.parametrize("index", range(len(COMPLEX_CASES)))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_complex128_evaluate_matches_python(index, data):
    _check_against_python("c", index, data, _complexes, np.complex128, complex, _close(1e-9, 1e-12))


def test_evaluate_keeps_dtype_and_broadcasts():
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    got = translate(ops.gelu_tanh).evaluate(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, translate(ops.gelu_tanh).evaluate(x.astype(np.float64)), rtol=1e-6, atol=1e-7)
    assert translate(lambda x: 0.5 * x).evaluate(np.arange(5, dtype=np.int32)).tolist() == [0] * 5  # 0.5 -> 0
    constant = translate(lambda x: 7).evaluate(np.zeros((2, 3), np.float32))
    assert constant.shape == (2, 3) and constant.dtype == np.float32 and (constant == 7).all()
    assert translate(lambda x, y: x + y, 2).evaluate(np.ones((2, 1)), np.ones(3)).shape == (2, 3)


def test_python_semantics_of_division_and_min_max():
    div = translate(lambda x, y: x // y, 2)
    mod = translate(lambda x, y: x % y, 2)
    a, b = np.array([7, -7, 7, -7, 5, -2**63]), np.array([2, 2, -2, -2, 0, -1])
    assert div.evaluate(a, b).tolist() == [3, -4, -4, 3, 0, -2**63]
    assert mod.evaluate(a, b).tolist() == [1, 1, -1, -1, 0, 0]
    assert mod.evaluate(np.array([-0.5, 0.5]), np.array([1.0, -1.0])).tolist() == [0.5, -0.5]
    nan = math.nan
    assert np.isnan(translate(lambda x: max(x, 0)).evaluate(np.array([nan])))[0]  # max(nan, 0) is nan
    assert translate(lambda x: max(0, x)).evaluate(np.array([nan]))[0] == 0  # max(0, nan) is 0
    assert np.isnan(translate(lambda x: np.maximum(0, x)).evaluate(np.array([nan])))[0]


# ---- rejected constructs: the error names the construct, the file and the line ----------------------

def foo(x):
    return x


w = np.ones(3)
name = "abc"


def _loop(x):
    for _ in range(3):
        x = x + 1
    return x


def _two_statements(x):
    """Docstring is fine; the assignment is not."""
    y = x + 1
    return y


REJECTED = [
    (lambda x: x.shape, "attribute access 'x.shape'"),
    (lambda x: foo(x), "call to unknown function 'foo'"),
    (lambda x: x(1), "call to unknown function 'x'"),
    (lambda x: x.conjugate(), "method call 'x.conjugate()'"),
    (lambda x: undefined_name + x, "undefined name 'undefined_name'"),  # noqa: F821
    (lambda x: [v for v in x], "list comprehension"),
    (lambda x: {v for v in x}, "set comprehension"),
    (lambda x: (v for v in x), "generator expression"),
    (lambda x: x + "a", "string literal 'a'"),
    (lambda x: x * w, "captured array 'w' (only numeric constants can be captured)"),
    (lambda x, w=w: x * w, "captured array 'w' (only numeric constants can be captured)"),
    (lambda x: x * name, "captured str 'name' (only numeric constants can be captured)"),
    (lambda x: x * np.exp, "captured function 'np.exp'"),
    (lambda x: x[0], "subscript 'x[0]'"),
    (lambda x: (y := x) + y, "assignment expression"),
    (lambda x: f"{x}", "f-string"),
    (lambda x: (lambda y: y)(x), "lambda inside a lambda"),
    (lambda x: x if x else (lambda: 1), "lambda inside a lambda"),
    (lambda x: np.clip(x, a_min=0, a_max=1), "keyword arguments in call to 'np.clip'"),
    (lambda x: np.exp(*x), "starred arguments"),
    (lambda x: x << 1, "operator '<<'"),
    (lambda x: x & 1, "operator '&'"),
    (lambda x: ~x, "operator '~'"),
    (lambda x: x is None, "operator 'is'"),
    (lambda x: x in (1, 2), "operator 'in'"),
    (lambda x: x + None, "constant None"),
    (lambda x: (x, x), "tuple '(x, x)'"),
    (lambda x: np.foo(x), "module 'numpy' has no attribute 'foo'"),
    (lambda x: np.linalg.norm(x), "call to unknown function 'np.linalg.norm'"),
    (lambda x: min(x), "min() needs at least 2 arguments, got 1"),
    (lambda x: np.exp(x, x), "np.exp() takes 1 argument, got 2"),
    (lambda *x: x, "variable arguments"),
    (lambda x, *, k: x * k, "keyword-only argument 'k' without a default"),
    (ops.leaky_relu, "lambda inside a lambda"),
    (_loop, "for loop 'for _ in range(3):'"),
    (_two_statements, "assignment 'y = x + 1'"),
]


@pytest.mark.parametrize("fn, message", REJECTED, ids=[m for _, m in REJECTED])
def test_rejected_construct_names_construct_file_and_line(fn, message):
    with pytest.raises(UnsupportedOperation) as info:
        translate(fn, 1, role="op_a")
    text = str(info.value)
    assert message in text
    first = fn.__code__.co_firstlineno
    if fn.__module__ == __name__:
        lines = [first + i for i in range(4)]  # a def's bad statement is a line or two below its first
        assert any(text.startswith(f'File "{HERE}", line {n}, in op_a: ') for n in lines), text
    else:
        assert text.startswith(f'File "{ops.__file__}", line ') and "in op_a: " in text, text


def test_bad_statement_line_is_reported():
    with pytest.raises(UnsupportedOperation, match=f'line {_loop.__code__.co_firstlineno + 1}, in op_b: for loop'):
        translate(_loop, role="op_b")


def test_wrong_arity():
    with pytest.raises(UnsupportedOperation, match="lambda takes 2 arguments, op_a needs 1"):
        translate(lambda x, y: x, 1, role="op_a")
    with pytest.raises(UnsupportedOperation, match="function '_loop' takes 1 argument, op_ab needs 2"):
        translate(_loop, 2, role="op_ab")
    with pytest.raises(UnsupportedOperation, match="maximum.. takes 2 arguments, got 1"):
        translate(np.maximum, 1, role="op_a")
    with pytest.raises(UnsupportedOperation, match="expression takes 1 arguments, reduce needs 2"):
        translate(translate(lambda x: x), 2, role="reduce")
    with pytest.raises(ValueError, match="arity must be 1 to 3"):
        translate(lambda: 1, 0)


def test_untranslatable_objects():
    with pytest.raises(UnsupportedOperation, match="cannot translate partial"):
        translate(functools.partial(max, 0))
    with pytest.raises(UnsupportedOperation, match="cannot read the source"):
        translate(eval("lambda x: x + 1"))  # noqa: S307 - deliberately a function without source
    with pytest.raises(UnsupportedOperation, match="cannot translate int"):
        translate(3)


@pytest.mark.parametrize("fn, ctype, message", [
    (lambda x: x / 2, "int", "true division '/' is not defined for integer compute type 'int' (use '//')"),
    (lambda x: np.exp(x), "long long", "function 'exp' is not defined for integer compute type 'long long'"),
    (lambda x: x < 1, "gett::complex<float>", "comparison '<' is not defined for complex compute type"),
    (lambda x: x // 2, "gett::complex<double>", "'//' is not defined for complex compute type"),
    (lambda x: max(x, 1), "gett::complex<float>", "function 'py_max' is not defined for complex"),
    (lambda x: x ** 2.5, "gett::complex<float>", "'**' with an exponent other than a literal -1..4"),
    (lambda x: x * 1j, "float", "complex constant 1j needs a complex compute type, not 'float'"),
    (lambda x: max(x, -math.inf), "int", "constant -inf has no value in integer compute type 'int'"),
    (lambda x: x + 1099511627776, "int", "constant 1099511627776 does not fit in compute type 'int'"),
])
def test_operations_missing_from_compute_type(fn, ctype, message):
    expr = translate(fn, role="op_out")
    with pytest.raises(UnsupportedOperation) as info:
        expr.render_cuda("f", ctype)
    assert message in str(info.value) and str(info.value).startswith(f'File "{HERE}", line ')
    with pytest.raises(UnsupportedOperation, match="in op_out"):
        expr.evaluate(np.zeros(2, COMPUTE_TYPES[ctype]))


# ---- keys, identity, function lookup --------------------------------------------------------------

def test_keys_ignore_parameter_names_and_depend_on_captured_values():
    assert translate(lambda x: x + 1).key == translate(lambda y: y + 1).key
    assert translate(lambda a, b: a * b, 2).key == translate(lambda u, v: u * v, 2).key
    assert translate(lambda a, b: a * b, 2).key != translate(lambda a, b: b * a, 2).key
    assert translate(_scaled(2.0)).key == translate(_scaled(2.0)).key
    assert translate(_scaled(2.0)).key != translate(_scaled(3.0)).key
    assert translate(_scaled(2.0)) == translate(lambda x: x * 2.0)
    assert hash(translate(_scaled(2.0))) == hash(translate(lambda t: t * 2.0))
    assert translate(lambda x: x + 1).key != translate(lambda x: x + True).key
    assert translate(lambda x, s=2.0: x * s).key == translate(_scaled(2.0)).key  # defaults are captured too


def test_globals_are_read_at_translate_time(monkeypatch):
    before = translate(lambda x: x * SCALE)
    monkeypatch.setattr(__import__(__name__), "SCALE", 4.0)
    after = translate(lambda x: x * SCALE)
    assert before.key != after.key and "float:4.0" in after.key


def test_function_aliases_share_a_key():
    keys = {translate(f).key for f in (np.exp, math.exp, math_exp, ops.exp, lambda x: m.exp(x),
                                       lambda x: xp.exp(x), lambda v: math_exp(v))}
    assert keys == {"lambda1:(exp $0)"}
    assert translate(ops.relu).key == translate(lambda x: max(x, 0)).key
    assert translate(ops.MAX_PLUS.add, 2).key == translate(np.maximum, 2).key == "lambda2:(maximum $0 $1)"
    assert translate(max, 2).key == "lambda2:(py_max $0 $1)"
    assert translate(lambda x: ops.sigmoid(x)).key == translate(ops.sigmoid).key == "lambda1:(sigmoid $0)"


def test_several_lambdas_on_one_line():
    k = 3.0
    fa, fb, fc = (lambda x: x + k), (lambda x: x * k), (lambda x: x + 1)
    assert [translate(f).key for f in (fa, fb, fc)] == [
        "lambda1:(add $0 float:3.0)", "lambda1:(mul $0 float:3.0)", "lambda1:(add $0 int:1)"]
    keyed = dict(op_a=lambda x: x - 1, op_b=lambda x: x - 2)
    assert translate(keyed["op_b"]).key == "lambda1:(sub $0 int:2)"
    pair = (lambda x: -x, lambda y: abs(y))
    assert translate(pair[1]).key == "lambda1:(abs $0)"


def test_gett_ops_inside_lambdas_are_inlined():
    lrelu = ops.leaky_relu(0.25)
    assert translate(lambda x: lrelu(x) * 2).key == translate(lambda x: (x if x > 0 else 0.25 * x) * 2).key
    assert translate(lambda x, y: ops.relu(x - y), 2).key == "lambda2:(py_max (sub $0 $1) int:0)"
    assert translate(lambda x: ops.tanh(ops.neg(x))).key == "lambda1:(tanh (neg $0))"


def test_is_identity():
    assert is_identity(lambda x: x) and is_identity(ops.identity) and is_identity(translate(lambda q: q))
    assert not is_identity(ops.neg) and not is_identity(lambda x: x + 0)


def test_semiring_identities():
    assert ops.MAX_PLUS.identity_for(np.float32) == -np.inf
    assert ops.MAX_PLUS.identity_for(np.int32) == np.iinfo(np.int32).min
    assert ops.MIN_PLUS.identity_for("int64") == np.iinfo(np.int64).max
    assert ops.PLUS_TIMES.identity_for(np.complex64) == 0
    assert ops.OR_AND.identity_for(np.int32) == 0 and ops.OR_AND.identity_for(np.float64).dtype == np.float64
    assert translate(ops.OR_AND.add, 2).key == "lambda2:(or $0 $1)"


# ---- on a GPU: the compiled code computes what evaluate computes ------------------------------------

_X = {"f": [-1000.0, -3.7, -2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 2.5, 3.0, 7.25, 100.0,
            math.nan, math.inf, -math.inf],
      "i": [-7, -3, -2, -1, 0, 1, 2, 3, 5, 100, 12345, -100000, 2**31 - 1, -2**31]}
_Y = {"f": [2.5, -1.0, 0.0, 3.0, -2.5, 0.75, -0.0, 2.0, 100.0, 0.3, math.inf, -3.7, 0.5, -7.25,
            1.0, math.nan, 2.0],
      "i": [2, -2, 3, 0, -1, 5, -3, 1, 7, 3, -4, 2, -1, -1]}


def _inputs(kind, dtype):
    if kind == "c":
        x, y = np.empty(len(_X["f"]), dtype), np.empty(len(_X["f"]), dtype)
        x.real, x.imag, y.real, y.imag = _X["f"], _Y["f"], _Y["f"], _X["f"][::-1]
        return x, y
    return np.array(_X[kind]).astype(dtype), np.array(_Y[kind]).astype(dtype)


@pytest.mark.gpu  # conftest skips it without a CUDA device
@pytest.mark.parametrize("kind, ctype", TRANSLATION_UNITS)
def test_cuda_matches_numpy_on_gpu(kind, ctype, tmp_path):
    cupy = pytest.importorskip("cupy")
    arch = "sm_" + cupy.cuda.Device().compute_capability
    cubin = tmp_path / "cases.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(_translation_unit(kind, ctype), arch=arch, include_dirs=[KERNELS]).cubin)
    dtype = COMPUTE_TYPES[ctype]
    x, y = _inputs(kind, dtype)
    exprs = _exprs(kind)
    out = cupy.zeros(len(exprs) * x.size, dtype)
    kernel = cupy.RawModule(path=str(cubin)).get_function("cases")
    kernel((1,), (64,), (out, cupy.asarray(x), cupy.asarray(y), np.int32(x.size)))
    got = out.get().reshape(len(exprs), x.size)
    single = dtype in (np.float32, np.complex64)
    for i, e in enumerate(exprs):
        expected = e.evaluate(*(x, y)[:e.arity])
        if kind == "i":
            np.testing.assert_array_equal(got[i], expected, err_msg=e.key)
        else:
            np.testing.assert_allclose(got[i], expected, rtol=2e-5 if single else 1e-12, atol=1e-6 if single else 1e-14,
                                       equal_nan=True, err_msg=e.key)
