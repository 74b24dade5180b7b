"""Named elementwise ops and semirings, ready to pass as ``op_a``, ``op_out``, ... to a plan.

The ops are plain Python functions (or numpy ufuncs) that gett translates like any user lambda,
so ``gett.ops.relu`` and ``lambda x: max(x, 0)`` give the same kernel. They may also be called
inside a user lambda (``lambda x: 2 * ops.gelu_tanh(x)``): gett inlines them.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["identity", "relu", "leaky_relu", "sigmoid", "tanh", "exp", "log", "abs", "neg", "conj", "sqrt",
           "elu", "gelu_tanh", "Semiring", "PLUS_TIMES", "MAX_PLUS", "MIN_PLUS", "MAX_TIMES", "OR_AND"]

tanh = np.tanh
exp = np.exp
log = np.log
abs = np.abs
sqrt = np.sqrt
conj = np.conj


def identity(x):
    """x (a plan skips the call altogether)."""
    return x


def neg(x):
    """-x."""
    return -x


def relu(x):
    """max(x, 0); NaN stays NaN."""
    return max(x, 0)


def sigmoid(x):
    """1 / (1 + exp(-x)); gett maps it to gett::fn::sigmoid."""
    return 1 / (1 + np.exp(-x))


def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def leaky_relu(alpha: float = 0.01) -> Callable:
    """The op x if x > 0 else alpha * x."""
    return lambda x: x if x > 0 else alpha * x


def elu(alpha: float = 1.0) -> Callable:
    """The op x if x > 0 else alpha * (exp(x) - 1)."""
    return lambda x: x if x > 0 else alpha * np.expm1(x)


class Semiring(NamedTuple):
    """A contraction C = add-reduce over k of multiply(a, b), the reduction starting at ``identity``.

    ``multiply`` is the plan's op_ab and ``add`` its (associative, commutative) reduction, both
    functions of two arguments; ``identity`` is the neutral element of ``add``.
    """

    multiply: Callable
    add: Callable
    identity: int | float

    def identity_for(self, dtype) -> np.generic:
        """``identity`` as a scalar of ``dtype``; for integer dtypes -inf/+inf become its min/max."""
        dtype = np.dtype(dtype)
        if dtype.kind in "iu" and math.isinf(self.identity):
            info = np.iinfo(dtype)
            return dtype.type(info.max if self.identity > 0 else info.min)
        return dtype.type(self.identity)


def _times(a, b):
    return a * b


def _plus(a, b):
    return a + b


def _and(a, b):
    return a and b


def _or(a, b):
    return a or b


PLUS_TIMES = Semiring(_times, _plus, 0)
MAX_PLUS = Semiring(_plus, np.maximum, -math.inf)
MIN_PLUS = Semiring(_plus, np.minimum, math.inf)
MAX_TIMES = Semiring(_times, np.maximum, -math.inf)
OR_AND = Semiring(_and, _or, 0)  # logical: any nonzero is true, results are 0 or 1
