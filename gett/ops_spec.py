"""The elementwise ops and the semiring of one plan, translated once and keyed for the plan cache."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from .errors import UnsupportedOperation

UNARY_ROLES = ("op_a", "op_b", "op_c", "op_out")


@dataclass(frozen=True)
class OpSpec:
    """Translated ops (``gett.expr.Expr`` or None for identity) and the semiring.

    ``op_ab`` None means multiply; ``reduce`` None means ``+`` with identity 0. A plan with a custom
    ``op_ab`` or ``reduce`` runs on the SIMT path.
    """
    op_a: object = None
    op_b: object = None
    op_c: object = None
    op_out: object = None
    op_ab: object = None
    reduce: object = None
    reduce_identity: Optional[Union[int, float, complex]] = None   # in the accumulator type

    @property
    def is_plus_times(self) -> bool:
        return self.op_ab is None and self.reduce is None

    @property
    def key(self) -> tuple:
        def k(e):
            return None if e is None else e.key
        return (k(self.op_a), k(self.op_b), k(self.op_c), k(self.op_out), k(self.op_ab), k(self.reduce),
                None if self.reduce_identity is None else repr(self.reduce_identity))

    @property
    def has_unary_ops(self) -> bool:
        return any(getattr(self, r) is not None for r in UNARY_ROLES)

    @property
    def semiring_key(self) -> tuple:
        """``key`` with the unary ops left out: what plans differing only in op_a/op_b/op_c/op_out share."""
        return (None,) * len(UNARY_ROLES) + self.key[len(UNARY_ROLES):]

    def describe(self) -> str:
        parts = [f"{r}={getattr(self, r).key}" for r in UNARY_ROLES + ("op_ab", "reduce")
                 if getattr(self, r) is not None]
        if self.reduce is not None:
            parts.append(f"identity={self.reduce_identity}")
        return ", ".join(parts)


def _translate(fn, arity, role):
    from .expr import is_identity, translate
    expr = translate(fn, arity, role=role)
    return None if arity == 1 and is_identity(expr) else expr


def make_op_spec(descriptors, *, op_a=None, op_b=None, op_c=None, op_out=None, op_ab=None,
                 reduce=None, compute=None) -> OpSpec:
    """Translate the user's ops (keyword or carried by a TensorDescriptor) into an :class:`OpSpec`."""
    given = {"op_a": op_a, "op_b": op_b, "op_c": op_c, "op_out": op_out}
    for role, tensor in (("op_a", "A"), ("op_b", "B"), ("op_c", "C")):
        carried = descriptors[tensor].op
        if carried is not None:
            if given[role] is not None:
                raise UnsupportedOperation(
                    f"{tensor} carries an op in its TensorDescriptor and {role}= was given too; pass one")
            given[role] = carried
    if all(v is None for v in given.values()) and op_ab is None and reduce is None:
        return OpSpec()
    exprs = {role: None if fn is None else _translate(fn, 1, role) for role, fn in given.items()}
    ab = None if op_ab is None else _translate(op_ab, 2, "op_ab")
    red, ident = None, None
    if reduce is not None:
        try:
            fn, ident = reduce
        except (TypeError, ValueError):
            raise UnsupportedOperation(
                "reduce must be a pair (function of two arguments, identity value), e.g. (max, -inf)") from None
        red = _translate(fn, 2, "reduce")
        ident = _identity_value(ident, compute)
    return OpSpec(exprs["op_a"], exprs["op_b"], exprs["op_c"], exprs["op_out"], ab, red, ident)


def _identity_value(value, compute):
    """The reduction's identity as a Python number of the accumulator type (``Semiring.identity_for``:
    ±inf is an integer type's min/max); UnsupportedOperation if it is not a number of that type."""
    from .ops import Semiring
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UnsupportedOperation(f"reduce identity must be a number, got {value!r}")
    if compute is None:
        return float(value)
    dtype = compute.accumulator.numpy
    is_float = isinstance(value, (float, np.floating))
    if dtype.kind in "iu" and not (is_float and math.isinf(value)):
        if is_float and not float(value).is_integer():
            raise UnsupportedOperation(
                f"reduce identity {value!r} is not an integer, the accumulator type is {dtype.name}")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise UnsupportedOperation(f"reduce identity {value!r} does not fit the accumulator type {dtype.name}")
    try:
        with np.errstate(over="ignore"):   # 1e39 is inf in float32, as it is in the kernel
            return Semiring(None, None, value).identity_for(dtype).item()
    except (OverflowError, ValueError):
        raise UnsupportedOperation(f"reduce identity {value!r} does not fit the accumulator type {dtype.name}") from None
