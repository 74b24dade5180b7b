"""The einsum grammar: numpy's subscripts strings (explicit ``->`` or implicit output, ``...``) and the
integer-sublist form, parsed against the operands' dimension counts into one label per axis.

Labels are the subscript letters; the axes an ellipsis stands for get the labels ``"...0"``,
``"...1"``, ... numbered so that operands with fewer of them line up on the right, as numpy
broadcasts. Errors are :class:`gett.ModeError` (a ``ValueError``) worded like numpy's, naming the
offending character and its position in the subscripts string.
"""
from __future__ import annotations

import operator
import string
from dataclasses import dataclass
from functools import lru_cache

from .errors import ModeError

ELLIPSIS = "..."
_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase   # numpy: 0 -> 'A', 26 -> 'a'


@dataclass(frozen=True)
class Expression:
    """A parsed einsum: per operand, one label per axis (``inputs``) and the position in the subscripts
    string each came from (``positions``; an ellipsis axis points at its ``...``); the output labels."""
    subscripts: str
    inputs: tuple
    positions: tuple
    output: tuple


def ellipsis_label(i: int) -> str:
    return f"{ELLIPSIS}{i}"


def describe_label(label: str) -> str:
    """How an error names a label: ``'i'``, or ``axis 0 of '...'``."""
    if label.startswith(ELLIPSIS):
        return f"axis {label[len(ELLIPSIS):]} of '...'"
    return repr(label)


def from_sublists(args: tuple) -> tuple:
    """numpy's ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])`` → (subscripts, operands).

    Sublist entries are ints in [0, 52) (0-25 name 'A'-'Z', 26-51 'a'-'z', as numpy) or ``...``."""
    operands = args[0::2] if len(args) % 2 == 0 else args[:-1:2]
    sublists = args[1::2]
    terms = ",".join(_sublist_term(s) for s in sublists)
    if len(args) % 2:
        terms += "->" + _sublist_term(args[-1])
    return terms, tuple(operands)


def _sublist_term(sublist) -> str:
    out = []
    for s in sublist:
        if s is Ellipsis:
            out.append(ELLIPSIS)
            continue
        try:
            i = operator.index(s)
        except TypeError:
            raise TypeError("each subscript must be either an integer or an ellipsis") from None
        if not 0 <= i < len(_SUBLIST_LETTERS):
            raise ModeError(f"subscript {i} is not within the valid range [0, 52)")
        out.append(_SUBLIST_LETTERS[i])
    return "".join(out)


@lru_cache(maxsize=1024)
def parse(subscripts: str, ndims: tuple) -> Expression:
    """Parse ``subscripts`` for operands with ``ndims`` dimensions. Raises ModeError on a malformed
    string, a count of terms that differs from the number of operands, a term whose subscripts don't
    fit its operand's dimensions, or an output subscript that is repeated or not in any input."""
    arrow = subscripts.find("-")
    if arrow >= 0 and subscripts[arrow + 1:arrow + 2] != ">":
        raise ModeError(f"einstein sum subscript string does not contain proper '->' output specified: "
                        f"'-' at position {arrow} of {subscripts!r} is not followed by '>'")
    lhs = subscripts if arrow < 0 else subscripts[:arrow]
    terms, start = [], 0
    for piece in lhs.split(","):
        terms.append(_scan(subscripts, start, start + len(piece), f"operand {len(terms)}"))
        start += len(piece) + 1
    if len(terms) < len(ndims):
        raise ModeError(f"more operands provided to einstein sum function than specified in the subscripts "
                        f"string: {len(ndims)} operands, {len(terms)} terms in {subscripts!r}")
    if len(terms) > len(ndims):
        raise ModeError(f"fewer operands provided to einstein sum function than specified in the subscripts "
                        f"string: {len(ndims)} operands, {len(terms)} terms in {subscripts!r}")
    widths = [_ellipsis_width(subscripts, k, term, nd) for k, (term, nd) in enumerate(zip(terms, ndims))]
    width = max(widths, default=0)
    inputs, positions = [], []
    for term, w in zip(terms, widths):
        labels, where = [], []
        for label, pos in term:
            expanded = ([ellipsis_label(i) for i in range(width - w, width)] if label == ELLIPSIS
                        else [label])
            labels += expanded
            where += [pos] * len(expanded)
        inputs.append(tuple(labels))
        positions.append(tuple(where))
    if arrow < 0:
        output = _implicit_output(inputs, width)
    else:
        output = _explicit_output(subscripts, arrow + 2, set().union(*inputs), width)
    return Expression(subscripts, tuple(inputs), tuple(positions), output)


def _scan(subscripts: str, start: int, stop: int, where: str) -> list:
    """[(label or '...', position)] for the characters in subscripts[start:stop]; spaces are skipped."""
    out, i, seen_ellipsis = [], start, False
    while i < stop:
        c = subscripts[i]
        if c in string.ascii_letters:
            out.append((c, i))
        elif c == ".":
            if subscripts[i:i + 3] != ELLIPSIS or i + 3 > stop or seen_ellipsis:
                raise ModeError(f"einstein sum subscripts string contains a '.' that is not part of an "
                                f"ellipsis ('...') in {where}: position {i} of {subscripts!r}")
            out.append((ELLIPSIS, i))
            seen_ellipsis = True
            i += 2
        elif not c.isspace():
            raise ModeError(f"invalid subscript {c!r} at position {i} of {subscripts!r}: einstein sum "
                            f"subscripts must be letters")
        i += 1
    return out


def _ellipsis_width(subscripts: str, k: int, term: list, ndim: int) -> int:
    """How many axes of operand ``k`` its ellipsis stands for."""
    letters = [pos for label, pos in term if label != ELLIPSIS]
    if len(letters) > ndim:
        raise ModeError(f"einstein sum subscripts string contains too many subscripts for operand {k}: "
                        f"{len(letters)} subscripts for {ndim} dimensions, the one at position "
                        f"{letters[ndim]} of {subscripts!r} is one too many")
    if len(letters) < ndim and len(letters) == len(term):
        raise ModeError(f"operand {k} has more dimensions ({ndim}) than subscripts given in einstein sum "
                        f"({len(letters)}, in {subscripts!r}), but no '...' ellipsis provided to broadcast "
                        f"the extra dimensions")
    return ndim - len(letters)


def _implicit_output(inputs: list, width: int) -> tuple:
    """numpy's implicit output: the broadcast axes, then every letter used once, in alphabetical order."""
    counts: dict = {}
    for labels in inputs:
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
    once = sorted(label for label, n in counts.items() if n == 1 and not label.startswith(ELLIPSIS))
    return tuple(ellipsis_label(i) for i in range(width)) + tuple(once)


def _explicit_output(subscripts: str, start: int, known: set, width: int) -> tuple:
    output, seen = [], {}
    for label, pos in _scan(subscripts, start, len(subscripts), "the output"):
        if label == ELLIPSIS:
            output += [ellipsis_label(i) for i in range(width)]
            seen[ELLIPSIS] = pos
            continue
        if label in seen:
            raise ModeError(f"einstein sum subscripts string includes output subscript {label!r} multiple "
                            f"times: positions {seen[label]} and {pos} of {subscripts!r}")
        if label not in known:
            raise ModeError(f"einstein sum subscripts string included output subscript {label!r} which never "
                            f"appeared in an input: position {pos} of {subscripts!r}")
        seen[label] = pos
        output.append(label)
    if width and ELLIPSIS not in seen:
        raise ModeError(f"output has more dimensions than subscripts given in einstein sum, but no '...' "
                        f"ellipsis provided to broadcast the extra dimensions: the inputs of {subscripts!r} "
                        f"broadcast over {width} axes")
    return tuple(output)
