"""Translate Python elementwise functions into typed expression trees.

``translate(fn, arity)`` reads the source of a lambda (or a ``def`` whose body is a single
``return``) and builds an :class:`Expr`. The tree renders to a CUDA ``__device__`` function for a
compute type (``Expr.render_cuda``) and evaluates with numpy in that same type (``Expr.evaluate``);
both follow one set of rules:

* every value is of the compute type T: literals and captured constants are cast to T (so ``0.5``
  is ``0.5f`` in a float kernel and ``0`` in an int one), and so is every intermediate result;
* comparisons, ``and``/``or``/``not`` and ``isnan`` yield booleans (``and``/``or`` are logical,
  not Python's "return an operand"); a boolean used as a number is 0 or 1, a number used as a
  condition is ``!= 0``;
* ``//`` and ``%`` follow Python (floor division, remainder with the sign of the divisor);
  integer division by zero gives 0, as in numpy; ``/`` needs a floating or complex type;
* ``x ** n`` for a literal n in -1..4 is computed by multiplication, other powers by ``pow``;
* ``min``/``max`` keep the first argument unless another compares less/greater (Python), while
  ``numpy.minimum``/``maximum``/``clip`` propagate NaN (numpy).

Anything else raises :class:`gett.errors.UnsupportedOperation` naming the construct and the
function's file and line: at translate time for constructs, at render/evaluate time for operations
that the compute type lacks (``/`` on integers, ``<`` on complex, ``exp`` on integers, ...).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import math
import types
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, reduce

import numpy as np

from gett import ops
from gett.errors import DTypeError, UnsupportedOperation

__all__ = ["Expr", "translate", "is_identity", "COMPUTE_TYPES"]

#: CUDA compute type -> numpy dtype of the same values.
COMPUTE_TYPES = {
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "int": np.dtype(np.int32),
    "long long": np.dtype(np.int64),
    "gett::complex<float>": np.dtype(np.complex64),
    "gett::complex<double>": np.dtype(np.complex128),
}
_PARAM_NAMES = ("x", "y", "z")


# ---- functions a lambda may call -------------------------------------------------------------

@dataclass(frozen=True)
class _Function:
    nargs: int
    kinds: str  # compute kinds it is defined for: i(nteger), f(loat), c(omplex)
    result: str = "value"  # "value" (T), "bool", or "real" (the real type for complex arguments)


_UNARY_FLOAT = ("exp", "expm1", "log", "log1p", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh",
                "erf", "floor", "ceil")
_FUNCTIONS = {
    **{name: _Function(1, "f") for name in _UNARY_FLOAT},
    "exp": _Function(1, "fc"), "log": _Function(1, "fc"), "sqrt": _Function(1, "fc"),
    "sigmoid": _Function(1, "f"),
    "pow": _Function(2, "if"),
    "abs": _Function(1, "ifc", "real"),
    "conj": _Function(1, "ifc"), "real": _Function(1, "ifc", "real"), "imag": _Function(1, "ifc", "real"),
    "isnan": _Function(1, "ifc", "bool"),
    "where": _Function(3, "ifc"),
    "maximum": _Function(2, "if"), "minimum": _Function(2, "if"),
    "py_max": _Function(2, "if"), "py_min": _Function(2, "if"),
    "clip": _Function(3, "if"), "sign": _Function(1, "if"),
    # x**n for literal n: see _power
    "square": _Function(1, "ifc"), "cube": _Function(1, "ifc"), "pow4": _Function(1, "ifc"),
    "recip": _Function(1, "ifc"),
}


def _python_functions() -> dict:
    """Python callables (by identity) -> name in _FUNCTIONS; min and max are handled by _Translator."""
    table = {abs: "abs", pow: "pow", math.fabs: "abs", np.abs: "abs", np.power: "pow",
             np.where: "where", np.maximum: "maximum", np.minimum: "minimum", np.clip: "clip",
             np.sign: "sign", np.conj: "conj", np.real: "real", np.imag: "imag", ops.sigmoid: "sigmoid"}
    for name in (*_UNARY_FLOAT, "pow", "isnan"):
        for module in (math, np):
            if hasattr(module, name):
                table[getattr(module, name)] = name
    return table


_PYTHON_FUNCTIONS = _python_functions()


def _function_name(obj) -> str | None:
    try:
        return _PYTHON_FUNCTIONS.get(obj)
    except TypeError:  # unhashable object
        return None


def _is_known(obj) -> bool:
    return obj is min or obj is max or _function_name(obj) is not None


def _call_known(fn, args: tuple[Node, ...], fail, name: str) -> Node:
    """The node for calling the supported Python function ``fn`` (called ``name`` in messages) on ``args``."""
    if fn is min or fn is max:
        if len(args) < 2:
            fail(f"{name}() needs at least 2 arguments, got {len(args)}")
        return reduce(lambda a, b: Call("py_min" if fn is min else "py_max", (a, b)), args)
    canonical = _function_name(fn)
    nargs = _FUNCTIONS[canonical].nargs
    if len(args) != nargs:
        fail(f"{name}() takes {nargs} argument{'s' * (nargs != 1)}, got {len(args)}")
    return _power(*args) if canonical == "pow" else Call(canonical, args)


# ---- compute context shared by rendering and evaluation ---------------------------------------

@dataclass(frozen=True)
class _Context:
    """Compute type of one rendering or evaluation, with conversions between bool and T."""

    dtype: np.dtype
    ctype: str
    origin: str

    @property
    def kind(self) -> str:
        """"i", "f" or "c": integer, floating or complex."""
        return self.dtype.kind

    def fail(self, message: str):
        raise UnsupportedOperation(f"{self.origin}: {message}")

    # CUDA text
    def value(self, node: Node) -> str:
        text = node.cuda(self)
        return f"static_cast<{self.ctype}>({text})" if node.is_bool else text

    def cond(self, node: Node) -> str:
        return node.cuda(self) if node.is_bool else f"({node.cuda(self)} != {self.literal(0)})"

    def literal(self, value) -> str:
        if self.kind == "c":
            real_type = self.ctype[len("gett::complex<"):-1]
            v = complex(value)
            return f"{self.ctype}({_real_literal(v.real, real_type)}, {_real_literal(v.imag, real_type)})"
        if self.kind == "f":
            return _real_literal(value, self.ctype)
        return _int_literal(int(value), self.ctype)

    # numpy arrays
    def np_value(self, node: Node, args) -> np.ndarray:
        return np.asarray(node.numpy(self, args)).astype(self.dtype, copy=False)

    def np_cond(self, node: Node, args) -> np.ndarray:
        result = node.numpy(self, args)
        return result if node.is_bool else result != 0


def _real_literal(value, ctype: str) -> str:
    with np.errstate(over="ignore"):  # 1e39 is inf in float, as numpy and nvcc agree
        x = np.float32(value) if ctype == "float" else np.float64(value)
    if np.isnan(x):
        return "__int_as_float(0x7fffffff)" if ctype == "float" else "__longlong_as_double(0x7ff8000000000000LL)"
    if np.isinf(x):
        inf = "__int_as_float(0x7f800000)" if ctype == "float" else "__longlong_as_double(0x7ff0000000000000LL)"
        return inf if x > 0 else f"(-{inf})"
    text = str(x) if ctype == "float" else repr(float(x))  # shortest text that round-trips
    text += "f" if ctype == "float" else ""
    return f"({text})" if text.startswith("-") else text


def _int_literal(value: int, ctype: str) -> str:
    suffix = "LL" if ctype == "long long" else ""
    if value == np.iinfo(COMPUTE_TYPES[ctype]).min:  # -2147483648 would parse as -(2147483648)
        return f"({value + 1}{suffix} - 1)"
    return f"({value}{suffix})" if value < 0 else f"{value}{suffix}"


# ---- expression nodes -------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """A node of an expression tree; ``is_bool`` nodes yield booleans, all others T."""

    is_bool = False

    def children(self) -> tuple[Node, ...]:
        return ()

    def check(self, ctx: _Context) -> None:
        """Raise UnsupportedOperation if this node has no meaning for ctx's compute type."""

    def key(self) -> str:
        raise NotImplementedError

    def cuda(self, ctx: _Context) -> str:
        raise NotImplementedError

    def numpy(self, ctx: _Context, args: tuple[np.ndarray, ...]) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class Param(Node):
    index: int

    def key(self):
        return f"${self.index}"

    def cuda(self, ctx):
        return _PARAM_NAMES[self.index]

    def numpy(self, ctx, args):
        return args[self.index]


@dataclass(frozen=True)
class Const(Node):
    value: bool | int | float | complex
    kind: str  # "bool", "int", "float" or "complex": the Python type, kept so 1, 1.0 and True differ

    @property
    def is_bool(self):
        return self.kind == "bool"

    def key(self):
        return f"{self.kind}:{self.value!r}"

    def check(self, ctx):
        if self.kind == "complex" and ctx.kind != "c":
            ctx.fail(f"complex constant {self.value!r} needs a complex compute type, not '{ctx.ctype}'")
        if ctx.kind == "i" and self.kind == "float" and not math.isfinite(self.value):
            ctx.fail(f"constant {self.value!r} has no value in integer compute type '{ctx.ctype}'")
        if ctx.kind == "i" and self.kind != "complex":
            info = np.iinfo(ctx.dtype)
            if not info.min <= int(self.value) <= info.max:
                ctx.fail(f"constant {self.value!r} does not fit in compute type '{ctx.ctype}'")
        if ctx.kind != "i" and self.kind == "int" and abs(self.value) > np.finfo(np.float64).max:
            ctx.fail(f"constant {self.value!r} does not fit in compute type '{ctx.ctype}'")

    def cuda(self, ctx):
        if self.is_bool:
            return "true" if self.value else "false"
        return ctx.literal(self.value)

    def numpy(self, ctx, args):
        if self.is_bool:
            return np.bool_(self.value)
        with np.errstate(over="ignore"):
            return np.asarray(self.value).astype(ctx.dtype)


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "neg" or "pos"
    operand: Node

    def children(self):
        return (self.operand,)

    def key(self):
        return f"({self.op} {self.operand.key()})"

    def cuda(self, ctx):
        return f"({'-' if self.op == 'neg' else '+'}{ctx.value(self.operand)})"

    def numpy(self, ctx, args):
        value = ctx.np_value(self.operand, args)
        return -value if self.op == "neg" else value


_BINARY_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}  # others are gett::fn::<op>


@dataclass(frozen=True)
class Binary(Node):
    op: str  # add, sub, mul, truediv, floordiv, mod, pow
    left: Node
    right: Node

    def children(self):
        return (self.left, self.right)

    def key(self):
        return f"({self.op} {self.left.key()} {self.right.key()})"

    def check(self, ctx):
        if self.op == "truediv" and ctx.kind == "i":
            ctx.fail(f"true division '/' is not defined for integer compute type '{ctx.ctype}' (use '//')")
        if self.op in ("floordiv", "mod") and ctx.kind == "c":
            symbol = "//" if self.op == "floordiv" else "%"
            ctx.fail(f"'{symbol}' is not defined for complex compute type '{ctx.ctype}'")
        if self.op == "pow" and ctx.kind == "c":
            ctx.fail(f"'**' with an exponent other than a literal -1..4 is not defined for '{ctx.ctype}'")

    def cuda(self, ctx):
        left, right = ctx.value(self.left), ctx.value(self.right)
        if self.op in _BINARY_SYMBOLS:
            return f"({left} {_BINARY_SYMBOLS[self.op]} {right})"
        return f"gett::fn::{self.op}({left}, {right})"

    def numpy(self, ctx, args):
        left, right = ctx.np_value(self.left, args), ctx.np_value(self.right, args)
        if self.op == "pow":
            return _np_pow(left, right)
        return _NP_BINARY[self.op](left, right)


_NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
              "floordiv": np.floor_divide, "mod": np.remainder}
_COMPARISONS = {"lt": ("<", np.less), "le": ("<=", np.less_equal), "gt": (">", np.greater),
                "ge": (">=", np.greater_equal), "eq": ("==", np.equal), "ne": ("!=", np.not_equal)}


@dataclass(frozen=True)
class Compare(Node):
    op: str  # lt, le, gt, ge, eq, ne
    left: Node
    right: Node
    is_bool = True

    def children(self):
        return (self.left, self.right)

    def key(self):
        return f"({self.op} {self.left.key()} {self.right.key()})"

    def check(self, ctx):
        if ctx.kind == "c" and self.op not in ("eq", "ne"):
            ctx.fail(f"comparison '{_COMPARISONS[self.op][0]}' is not defined for complex compute type '{ctx.ctype}'")

    def cuda(self, ctx):
        return f"({ctx.value(self.left)} {_COMPARISONS[self.op][0]} {ctx.value(self.right)})"

    def numpy(self, ctx, args):
        return _COMPARISONS[self.op][1](ctx.np_value(self.left, args), ctx.np_value(self.right, args))


@dataclass(frozen=True)
class Logical(Node):
    op: str  # "and" or "or"
    operands: tuple[Node, ...]
    is_bool = True

    def children(self):
        return self.operands

    def key(self):
        return f"({self.op} {' '.join(o.key() for o in self.operands)})"

    def cuda(self, ctx):
        symbol = " && " if self.op == "and" else " || "
        return f"({symbol.join(ctx.cond(o) for o in self.operands)})"

    def numpy(self, ctx, args):
        combine = np.logical_and if self.op == "and" else np.logical_or
        return reduce(combine, (ctx.np_cond(o, args) for o in self.operands))


@dataclass(frozen=True)
class Not(Node):
    operand: Node
    is_bool = True

    def children(self):
        return (self.operand,)

    def key(self):
        return f"(not {self.operand.key()})"

    def cuda(self, ctx):
        return f"(!{ctx.cond(self.operand)})"

    def numpy(self, ctx, args):
        return np.logical_not(ctx.np_cond(self.operand, args))


@dataclass(frozen=True)
class Select(Node):
    """``a if cond else b``."""

    cond: Node
    a: Node
    b: Node

    @property
    def is_bool(self):
        return self.a.is_bool and self.b.is_bool

    def children(self):
        return (self.cond, self.a, self.b)

    def key(self):
        return f"(if {self.cond.key()} {self.a.key()} {self.b.key()})"

    def cuda(self, ctx):
        branch = (lambda n: n.cuda(ctx)) if self.is_bool else ctx.value
        return f"({ctx.cond(self.cond)} ? {branch(self.a)} : {branch(self.b)})"

    def numpy(self, ctx, args):
        branch = (lambda n: n.numpy(ctx, args)) if self.is_bool else (lambda n: ctx.np_value(n, args))
        return np.where(ctx.np_cond(self.cond, args), branch(self.a), branch(self.b))


@dataclass(frozen=True)
class Call(Node):
    name: str  # a key of _FUNCTIONS
    args: tuple[Node, ...]

    @property
    def is_bool(self):
        return _FUNCTIONS[self.name].result == "bool"

    def children(self):
        return self.args

    def key(self):
        return f"({self.name} {' '.join(a.key() for a in self.args)})"

    def check(self, ctx):
        if ctx.kind not in _FUNCTIONS[self.name].kinds:
            kind = {"i": "integer", "f": "floating", "c": "complex"}[ctx.kind]
            ctx.fail(f"function '{self.name}' is not defined for {kind} compute type '{ctx.ctype}'")

    def _args(self, ctx, value, cond):
        # where's first argument is a condition; every other argument is a value
        return [cond(a) if self.name == "where" and i == 0 else value(a) for i, a in enumerate(self.args)]

    def cuda(self, ctx):
        text = f"gett::fn::{self.name}({', '.join(self._args(ctx, ctx.value, ctx.cond))})"
        if _FUNCTIONS[self.name].result == "real" and ctx.kind == "c":
            return f"{ctx.ctype}({text})"  # |z|, re z, im z are real: make them complex again
        return text

    def numpy(self, ctx, args):
        values = self._args(ctx, lambda a: ctx.np_value(a, args), lambda a: ctx.np_cond(a, args))
        return _NP_FUNCTIONS[self.name](*values)


def _np_int_pow(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """x**n for integers, as gett::fn::pow: wraps on overflow, truncates 1/x**|n| for n < 0."""
    negative = np.where(x == 1, 1, np.where(x == -1, np.where(n % 2 == 0, 1, -1), 0))
    return np.where(n < 0, negative, np.power(x, np.where(n < 0, 0, n))).astype(x.dtype)


def _np_pow(x, n):
    """x ** n as gett::fn::pow computes it: C pow for floats (not numpy's sqrt for a scalar 0.5)."""
    if x.dtype.kind == "i":
        return _np_int_pow(x, n)
    shape = np.broadcast_shapes(x.shape, n.shape)
    # a stride-0 exponent of 0.5 makes numpy call sqrt: pow(-inf, 0.5) would be nan, not inf
    x, n = (np.broadcast_to(a, shape).reshape(-1).copy() for a in (x, n))
    return np.power(x, n).reshape(shape)


_np_erf = np.vectorize(math.erf, otypes=[np.float64])

_NP_FUNCTIONS = {
    **{name: getattr(np, name) for name in _UNARY_FLOAT if hasattr(np, name)},
    "erf": lambda x: _np_erf(x.astype(np.float64)),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "pow": _np_pow,
    "abs": np.abs, "conj": np.conj, "real": np.real, "imag": np.imag, "isnan": np.isnan,
    "where": np.where, "maximum": np.maximum, "minimum": np.minimum,
    "py_max": lambda a, b: np.where(b > a, b, a),
    "py_min": lambda a, b: np.where(b < a, b, a),
    "clip": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "sign": np.sign,
    "square": lambda x: x * x,
    "cube": lambda x: x * x * x,
    "pow4": lambda x: (x * x) * (x * x),
    "recip": lambda x: _np_int_pow(x, np.asarray(-1, x.dtype)) if x.dtype.kind == "i" else 1 / x,
}


def _walk(node: Node):
    yield node
    for child in node.children():
        yield from _walk(child)


def _substitute(node: Node, args: tuple[Node, ...]) -> Node:
    """``node`` with every Param(i) replaced by args[i] (inlines a gett.ops function)."""
    if isinstance(node, Param):
        return args[node.index]

    def sub(value):
        if isinstance(value, Node):
            return _substitute(value, args)
        if isinstance(value, tuple):
            return tuple(sub(v) for v in value)
        return value

    return dataclasses.replace(node, **{f.name: sub(getattr(node, f.name)) for f in dataclasses.fields(node)})


# ---- the public expression --------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Expr:
    """An elementwise function of ``arity`` arguments; equal (and hashed) by ``key``."""

    body: Node
    arity: int
    origin: str = field(default="", repr=False)  # 'File "f.py", line 3, in op_a', for error messages

    @cached_property
    def key(self) -> str:
        """Canonical text: equal for equal expressions with equal captured values, else different."""
        return f"lambda{self.arity}:{self.body.key()}"

    def __eq__(self, other):
        return isinstance(other, Expr) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def _context(self, dtype: np.dtype, ctype: str) -> _Context:
        ctx = _Context(dtype, ctype, self.origin)
        for node in _walk(self.body):
            node.check(ctx)
        return ctx

    def render_cuda(self, func_name: str, ctype: str) -> str:
        """A complete ``__device__ __forceinline__ ctype func_name(ctype x[, ctype y])`` definition.

        ``ctype`` is one of COMPUTE_TYPES; the code needs ``kernels/elementwise.cuh``.
        """
        if ctype not in COMPUTE_TYPES:
            raise DTypeError(f"unknown compute type {ctype!r}; expected one of {sorted(COMPUTE_TYPES)}")
        ctx = self._context(COMPUTE_TYPES[ctype], ctype)
        params = ", ".join(f"{ctype} {name}" for name in _PARAM_NAMES[:self.arity])
        return (f"__device__ __forceinline__ {ctype} {func_name}({params}) {{\n"
                f"    return {ctx.value(self.body)};\n"
                f"}}\n")

    def evaluate(self, *args) -> np.ndarray:
        """Elementwise numpy evaluation in the arguments' common dtype, as the CUDA rendering computes."""
        if len(args) != self.arity:
            raise TypeError(f"expression takes {self.arity} arguments, got {len(args)}")
        arrays = [np.asarray(a) for a in args]
        dtype = np.result_type(*arrays)
        ctype = next((c for c, d in COMPUTE_TYPES.items() if d == dtype), None)
        if ctype is None:
            raise DTypeError(f"cannot evaluate in dtype {dtype}; "
                             f"expected one of {sorted(map(str, COMPUTE_TYPES.values()))}")
        ctx = self._context(dtype, ctype)
        arrays = tuple(a.astype(dtype, copy=False) for a in arrays)
        with np.errstate(all="ignore"):  # inf, nan and integer division by zero are results, not errors
            result = ctx.np_value(self.body, arrays)
        return np.broadcast_to(result, np.broadcast_shapes(*(a.shape for a in arrays))).copy()


def keeps_zero(expr: Expr, dtype) -> bool:
    """Whether the unary ``expr`` maps 0 to 0 in ``dtype`` (-0 counts): then it may run over tiles whose
    out-of-range elements were filled with zeros (kernels: TMA tiles) without masking them."""
    return bool(expr.evaluate(np.zeros(1, dtype))[0] == 0)


def is_identity(expr) -> bool:
    """True if ``expr`` (an Expr or anything translate accepts with arity 1) is ``lambda x: x``."""
    expr = expr if isinstance(expr, Expr) else translate(expr, 1)
    return expr.arity == 1 and expr.body == Param(0)


# ---- translation ------------------------------------------------------------------------------

def translate(fn, arity: int = 1, *, role: str = "op") -> Expr:
    """Translate ``fn`` into an Expr of ``arity`` arguments; ``role`` (e.g. "op_a") names it in errors.

    ``fn`` is a lambda, a ``def`` whose body is one ``return`` (after an optional docstring), a
    supported function itself (``numpy.exp``, ``abs``, ``gett.ops.sigmoid``, ...) or an Expr.
    Parameters beyond ``arity`` that have default values are captured constants.
    Raises UnsupportedOperation for anything else.
    """
    if not 1 <= arity <= len(_PARAM_NAMES):
        raise ValueError(f"arity must be 1 to {len(_PARAM_NAMES)}, got {arity}")
    if isinstance(fn, Expr):
        if fn.arity != arity:
            raise UnsupportedOperation(f"in {role}: expression takes {fn.arity} arguments, {role} needs {arity}")
        return fn
    origin = f"in {role}"
    if _is_known(fn):
        name = getattr(fn, "__name__", repr(fn))
        return Expr(_call_known(fn, tuple(map(Param, range(arity))), lambda msg: _fail(origin, msg), name),
                    arity, origin)
    if not isinstance(fn, types.FunctionType):
        raise UnsupportedOperation(f"{origin}: cannot translate {type(fn).__name__} {fn!r}; "
                                   f"pass a lambda, a def with a single return, or a gett.ops function")
    return _Translator(fn, arity, role).translate()


def _fail(origin: str, message: str):
    raise UnsupportedOperation(f"{origin}: {message}")


@lru_cache(maxsize=64)
def _function_index(source: str) -> dict[int, list[ast.AST]]:
    """First line (decorators included, as in co_firstlineno) -> lambdas and defs starting there."""
    index: dict[int, list[ast.AST]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            index.setdefault(first, []).append(node)
    return index


def _argument_names(node) -> list[str]:
    a = node.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _inside(node: ast.AST, code: types.CodeType) -> bool:
    """True if every instruction of ``code`` with a source span lies within ``node`` (Python >= 3.11)."""
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
    return all(start <= (line, col) and (end_line, end_col) <= end
               for line, end_line, col, end_col in code.co_positions()
               if None not in (line, end_line, col, end_col) and (line, col) < (end_line, end_col))


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset, node.lineno, node.col_offset)


class _Translator:
    """Translates one Python function's AST; raises UnsupportedOperation with its file and line."""

    def __init__(self, fn: types.FunctionType, arity: int, role: str):
        self.fn, self.arity, self.role = fn, arity, role
        self.code = fn.__code__
        self.filename = self.code.co_filename
        self.line = self.code.co_firstlineno

    def fail(self, message: str, node: ast.AST | None = None):
        line = getattr(node, "lineno", self.line)
        raise UnsupportedOperation(f'File "{self.filename}", line {line}, in {self.role}: {message}')

    @property
    def origin(self) -> str:
        return f'File "{self.filename}", line {self.line}, in {self.role}'

    # -- locating the source -------------------------------------------------------------------

    def find_node(self) -> ast.Lambda | ast.FunctionDef:
        try:
            lines, _ = inspect.findsource(self.fn)
        except (OSError, TypeError):
            self.fail(f"cannot read the source of {self.fn.__qualname__}; define it in a file")
        candidates = [
            node for node in _function_index("".join(lines)).get(self.line, [])
            if (node.name if not isinstance(node, ast.Lambda) else "<lambda>") == self.code.co_name
            and _argument_names(node) == list(self.code.co_varnames[:len(_argument_names(node))])
        ]
        if len(candidates) > 1 and hasattr(self.code, "co_positions"):
            # several lambdas on one line: keep the innermost one whose span holds all of fn's code
            inside = [node for node in candidates if _inside(node, self.code)]
            candidates = [min(inside, key=_span)] if inside else []
        if not candidates:
            self.fail(f"cannot find the source of {self.fn.__qualname__}")
        if len({ast.dump(node) for node in candidates}) > 1:
            self.fail(f"cannot tell which of the functions on line {self.line} is {self.role}; "
                      f"put them on separate lines")
        return candidates[0]

    # -- parameters and body -------------------------------------------------------------------

    def translate(self) -> Expr:
        node = self.find_node()
        what = "lambda" if isinstance(node, ast.Lambda) else f"function '{node.name}'"
        args = node.args
        if args.vararg or args.kwarg:
            self.fail(f"{what} has variable arguments (*args or **kwargs)", node)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is None:
                self.fail(f"{what} has keyword-only argument '{arg.arg}' without a default", node)
        positional = [p.arg for p in (*args.posonlyargs, *args.args)]
        required = len(positional) - len(args.defaults)
        if not required <= self.arity <= len(positional):
            self.fail(f"{what} takes {len(positional)} argument{'s' * (len(positional) != 1)}, "
                      f"{self.role} needs {self.arity}", node)
        self.params = {name: i for i, name in enumerate(positional[:self.arity])}
        # parameters with defaults that the op does not pass are captured constants
        self.constants = dict(zip(positional[required:], self.fn.__defaults__ or ()))
        self.constants.update(self.fn.__kwdefaults__ or {})
        self.cells = {}
        for name, cell in zip(self.code.co_freevars, self.fn.__closure__ or ()):
            try:
                self.cells[name] = cell.cell_contents
            except ValueError:
                self.fail(f"free variable '{name}' is referenced before assignment", node)
        self.cells.update((k, v) for k, v in self.constants.items() if k not in self.params)
        body = node.body if isinstance(node, ast.Lambda) else self._return_value(node)
        return Expr(self.expr(body), self.arity, self.origin)

    def _return_value(self, node: ast.FunctionDef) -> ast.expr:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # docstring
        statement = body[0] if body else node
        if len(body) != 1 or not isinstance(statement, ast.Return) or statement.value is None:
            bad = next((s for s in body if not isinstance(s, ast.Return)), statement)
            self.fail(f"{_describe_statement(bad)} (only a single return statement is supported)", bad)
        return statement.value

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, node: ast.expr) -> Node:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            self.fail(f"{_describe(node)} is not supported", node)
        return method(node)

    def _Constant(self, node):
        return self.constant(node.value, repr(node.value), node)

    def _Name(self, node):
        if node.id in self.params:
            return Param(self.params[node.id])
        return self.constant(self.lookup(node.id, node), node.id, node)

    def _Attribute(self, node):
        return self.constant(self.resolve(node), ast.unparse(node), node)

    def _UnaryOp(self, node):
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(operand)
        if isinstance(node.op, ast.USub):
            if isinstance(operand, Const) and operand.kind != "bool":  # so -1 is the literal -1
                return Const(-operand.value, operand.kind)
            return Unary("neg", operand)
        if isinstance(node.op, ast.UAdd):
            return Unary("pos", operand)
        self.fail(f"operator '~' in '{ast.unparse(node)}' is not supported", node)

    _BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
               ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow"}

    def _BinOp(self, node):
        op = self._BINARY.get(type(node.op))
        if op is None:
            self.fail(f"operator '{_operator_text(node)}' in '{ast.unparse(node)}' is not supported", node)
        left, right = self.expr(node.left), self.expr(node.right)
        return _power(left, right) if op == "pow" else Binary(op, left, right)

    _BOOL = {ast.And: "and", ast.Or: "or"}

    def _BoolOp(self, node):
        return Logical(self._BOOL[type(node.op)], tuple(self.expr(v) for v in node.values))

    _COMPARE = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

    def _Compare(self, node):
        for op in node.ops:
            if type(op) not in self._COMPARE:
                self.fail(f"operator '{_operator_text(node, op)}' in '{ast.unparse(node)}' is not supported", node)
        operands = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        parts = [Compare(self._COMPARE[type(op)], left, right)
                 for op, left, right in zip(node.ops, operands, operands[1:])]
        return parts[0] if len(parts) == 1 else Logical("and", tuple(parts))  # 0 < x < 1

    def _IfExp(self, node):
        return Select(self.expr(node.test), self.expr(node.body), self.expr(node.orelse))

    def _Call(self, node):
        name = ast.unparse(node.func)
        if node.keywords:
            self.fail(f"keyword arguments in call to '{name}' are not supported", node)
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.fail(f"starred arguments in call to '{name}' are not supported", node)
        if isinstance(node.func, ast.Lambda):
            self.fail(f"{_describe(node.func)} is not supported", node)
        if isinstance(node.func, ast.Attribute) and _base_name(node.func) in self.params:
            self.fail(f"method call '{name}()' is not supported", node)
        if not isinstance(node.func, (ast.Name, ast.Attribute)) or name in self.params:
            self.fail(f"call to unknown function '{name}'", node)
        fn = self.resolve(node.func, calling=True)
        args = tuple(self.expr(a) for a in node.args)
        if _is_known(fn):
            return _call_known(fn, args, lambda msg: self.fail(msg, node), name)
        if isinstance(fn, types.FunctionType) and fn.__module__ == ops.__name__:
            return _substitute(translate(fn, len(args), role=self.role).body, args)
        self.fail(f"call to unknown function '{name}'", node)

    # -- names ---------------------------------------------------------------------------------

    def lookup(self, name: str, node: ast.AST):
        """The object ``name`` refers to in fn: closure cell, default, global or builtin."""
        if name in self.cells:
            return self.cells[name]
        if name in self.fn.__globals__:
            return self.fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self.fail(f"undefined name '{name}'", node)

    def resolve(self, node: ast.expr, calling: bool = False):
        """The object a dotted name (``np.exp``, ``math.pi``) refers to; attributes of modules only."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id, node)
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)) \
                and _base_name(node) not in self.params:
            base = self.resolve(node.value)
            if isinstance(base, types.ModuleType):
                if not hasattr(base, node.attr):
                    self.fail(f"module '{base.__name__}' has no attribute '{node.attr}'", node)
                return getattr(base, node.attr)
        if calling and isinstance(node, ast.Attribute):
            self.fail(f"method call '{ast.unparse(node)}()' is not supported", node)
        self.fail(f"attribute access '{ast.unparse(node)}' is not supported", node)

    def constant(self, value, text: str, node: ast.AST) -> Const:
        """A captured or literal value as a Const; only numbers (and numpy scalars) qualify."""
        if isinstance(value, (bool, np.bool_)):
            return Const(bool(value), "bool")
        if isinstance(value, (int, np.integer)):
            return Const(int(value), "int")
        if isinstance(value, (float, np.floating)):
            return Const(float(value), "float")
        if isinstance(value, (complex, np.complexfloating)):
            return Const(complex(value), "complex")
        if isinstance(node, ast.Constant):
            self.fail(f"{_describe(node)} is not supported", node)
        what = "array" if hasattr(value, "shape") else ("function" if callable(value) else type(value).__name__)
        self.fail(f"captured {what} '{text}' (only numeric constants can be captured)", node)


def _power(base: Node, exponent: Node) -> Node:
    """``base ** exponent``: multiplications for a literal exponent in -1..4, else pow."""
    if isinstance(exponent, Const) and exponent.kind in ("int", "float") and exponent.value in (-1, 0, 1, 2, 3, 4):
        n = int(exponent.value)
        if n == 0:
            return Const(1, "int")
        if n == 1:
            return base
        return Call({-1: "recip", 2: "square", 3: "cube", 4: "pow4"}[n], (base,))
    return Binary("pow", base, exponent)


def _base_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_DESCRIPTIONS = {
    ast.ListComp: "list comprehension", ast.SetComp: "set comprehension", ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression", ast.Lambda: "lambda inside a lambda",
    ast.NamedExpr: "assignment expression (walrus ':=')", ast.JoinedStr: "f-string", ast.Subscript: "subscript",
    ast.List: "list display", ast.Tuple: "tuple", ast.Set: "set display", ast.Dict: "dict display",
    ast.Starred: "starred expression", ast.Slice: "slice", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from",
}


def _describe(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        kind = {str: "string literal", bytes: "bytes literal"}.get(type(node.value), "constant")
        return f"{kind} {_snippet(node)}"
    return f"{_DESCRIPTIONS.get(type(node), type(node).__name__ + ' expression')} '{_snippet(node)}'"


def _describe_statement(node: ast.stmt) -> str:
    names = {ast.For: "for loop", ast.AsyncFor: "for loop", ast.While: "while loop", ast.If: "if statement",
             ast.Assign: "assignment", ast.AugAssign: "assignment", ast.AnnAssign: "assignment",
             ast.With: "with statement", ast.Try: "try statement", ast.Return: "return without a value"}
    return f"{names.get(type(node), 'statement')} '{ast.unparse(node).splitlines()[0][:60]}'"


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


_OPERATOR_TEXT = {ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
                  ast.BitAnd: "&", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}


def _operator_text(node, op=None) -> str:
    return _OPERATOR_TEXT.get(type(op if op is not None else node.op), "?")
