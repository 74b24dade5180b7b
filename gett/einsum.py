"""gett.einsum, gett.tensordot, gett.transpose: numpy's einsum on gett's kernels.

An einsum call is planned once per signature — subscripts, each operand's type, shape, strides,
dtype, pointer alignment and device, ``out``'s likewise, whether ``beta`` is 0, the ops, compute type
and path option — into a *program*: one GETT contraction per step of an opt_einsum path, each with its
kernel bound to the device. A repeated call looks the program up (one dictionary access) and launches.

How the grammar maps onto contractions:
- a label repeated inside one operand (a diagonal or trace) is a strided view of it whose stride is
  the sum of that label's strides; an axis of extent 1 whose label is longer elsewhere is broadcast
  (the view drops it). On the GPU the view is the plan's descriptor read at the operand's own pointer,
  so nothing is copied or even wrapped; numpy operands get ``as_strided`` views for the reference
  executor;
- one operand: a contraction with a 0-d ones tensor as B (labels not in the output are summed);
- two operands: one contraction;
- three or more: pairwise contractions along ``opt_einsum.contract_path``; each intermediate is
  allocated once per call, row-major with its labels ordered for the step that reads it — batch labels,
  then the labels that step keeps in its output order, then the summed labels in the other operand's
  order (K innermost, as a TN GEMM reads, and modes that merge in both operands).
"""
from __future__ import annotations

import string
from functools import lru_cache

import numpy as np

from .arrays import NUMPY, NUMPY_KIND, OUT_SIGNATURES, SIGNATURES, describe, kind_of
from .contract import contract
from .descriptor import TensorDescriptor
from .einsum_parse import describe_label, from_sublists, parse
from .errors import DeviceError, DTypeError, ExtentMismatchError, OutputNotWritableError
from .launch import launcher
from .plan import plan_contraction
from .plan_cache import EINSUM as _PROGRAMS


def einsum(subscripts, *operands, out=None, alpha=1, beta=0, op_a=None, op_b=None, op_out=None,
           compute_type=None, optimize="auto"):
    """``out = op_out(alpha · einsum(subscripts, *operands) + beta · out)``, numpy's grammar.

    ``subscripts`` is numpy's string (explicit ``->`` or implicit output, ``...``, repeated labels for
    diagonals and traces) or the first operand of the sublist form ``einsum(A, [0, 1], B, [1, 2], [0, 2])``.
    Operands are all CuPy arrays, all PyTorch CUDA tensors, all objects with ``__cuda_array_interface__``
    or DLPack (run through zero-copy CuPy views), or all numpy arrays (the reference executor), of one
    dtype, on one device. The work is launched on the current stream (PyTorch's for tensors) without
    synchronising. Returns ``out`` if given (written in place; ``beta ≠ 0`` reads it first) or a new
    row-major array of the caller's type (0-d for a scalar result). ``op_a``/``op_b`` apply to the first/
    second of at most two operands as they are read, ``op_out`` to each result element; ``compute_type``
    as for :func:`gett.plan_contraction`; ``optimize`` is opt_einsum's path option (a strategy name,
    ``True``/``False`` or an explicit path). Errors (``ValueError``/``TypeError``, numpy's wording plus the
    position in ``subscripts``) are raised before anything is written.
    """
    if type(subscripts) is not str:
        subscripts, operands = from_sublists((subscripts,) + operands)
    try:
        key = (subscripts, tuple([SIGNATURES[type(x)](x) for x in operands]),
               None if out is None else OUT_SIGNATURES[type(out)](out), beta != 0, op_a, op_b, op_out,
               compute_type, optimize if type(optimize) in (str, bool) else _path_key(optimize))
    except KeyError:   # a type met for the first time, or one that goes through a CuPy view
        return _einsum_other_types(subscripts, operands, out, dict(
            alpha=alpha, beta=beta, op_a=op_a, op_b=op_b, op_out=op_out, compute_type=compute_type,
            optimize=optimize))
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS.put(key, _Program(subscripts, operands, out, beta != 0, op_a, op_b, op_out,
                                              compute_type, optimize))
    return program(operands, out, alpha, beta)


def tensordot(a, b, axes=2):
    """numpy.tensordot through :func:`einsum`: sums a's axes ``axes[0]`` against b's ``axes[1]`` (an int
    N: a's last N against b's first N); the result has a's other axes, then b's."""
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = tuple(range(a.ndim - int(axes), a.ndim)), tuple(range(int(axes)))
    else:
        axes_a, axes_b = (tuple(x) if isinstance(x, (list, tuple)) else (x,) for x in axes)
    return einsum(_tensordot_subscripts(a.ndim, b.ndim, axes_a, axes_b), a, b)


def transpose(a, axes=None):
    """``a`` with its axes permuted (``None``: reversed) — a view: gett's kernels read any strides, so
    the contraction that follows reads it in place instead of a transposed copy."""
    axes = tuple(reversed(range(a.ndim))) if axes is None else tuple(axes)
    return a.permute(*axes) if type(a).__module__.startswith("torch") else a.transpose(axes)


@lru_cache(maxsize=256)
def _tensordot_subscripts(ndim_a: int, ndim_b: int, axes_a: tuple, axes_b: tuple) -> str:
    axes_a = tuple(i % ndim_a if ndim_a else i for i in axes_a)
    axes_b = tuple(i % ndim_b if ndim_b else i for i in axes_b)
    if len(axes_a) != len(axes_b):
        raise ValueError(f"tensordot: {len(axes_a)} axes of a but {len(axes_b)} of b to sum over")
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in range(ndim_a)]
    lb = [la[axes_a[axes_b.index(i)]] if i in axes_b else next(letters) for i in range(ndim_b)]
    free = [x for i, x in enumerate(la) if i not in axes_a] + [x for i, x in enumerate(lb) if i not in axes_b]
    return f"{''.join(la)},{''.join(lb)}->{''.join(free)}"


def _path_key(optimize):
    """A hashable stand-in for ``optimize``: explicit paths (lists) as tuples, other objects as they are."""
    if isinstance(optimize, (list, tuple)):
        return tuple(tuple(s) if isinstance(s, (list, tuple)) else s for s in optimize)
    return optimize


# Steps ----------------------------------------------------------------------------------------------------
def _runner(kind, plan, views, device):
    """What runs one step, called as ``run(A, B, C, D, alpha, beta)``. On the GPU, the plan's launcher:
    a view's descriptor starts at its operand's element 0, so the operand itself is what is launched on.
    Host arrays go through :func:`gett.contract` on ``as_strided`` views (a check, not a fast path)."""
    if kind.name != NUMPY:
        return launcher(plan, device, kind.name)

    def run(A, B, C, D, alpha, beta):
        contract(plan, alpha, _strided(A, views[0]), _strided(B, views[1]), beta, C, D)
    return run


def _strided(x, view):
    if view is None:
        return x
    shape, strides = view
    return np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides), writeable=False)


def _einsum_other_types(subscripts, operands, out, options: dict):
    """First sight of an array type: register it; or run operands that carry ``__cuda_array_interface__``
    or DLPack as zero-copy CuPy views and hand the result back as the caller's type."""
    arrays = operands + (() if out is None else (out,))
    if all(kind_of(x) is not None for x in arrays):
        return einsum(subscripts, *operands, out=out, **options)
    foreign = next(x for x in arrays if kind_of(x) is None)
    if not (hasattr(foreign, "__cuda_array_interface__") or hasattr(foreign, "__dlpack__")):
        if all(kind_of(x) in (None, NUMPY_KIND) for x in arrays):   # numbers, lists: as numpy.einsum takes them
            return einsum(subscripts, *map(np.asarray, operands), out=out, **options)
        raise TypeError(f"unsupported operand type {type(foreign).__name__}: gett.einsum takes numpy, CuPy and "
                        f"PyTorch arrays and objects with __cuda_array_interface__ or __dlpack__")
    result = einsum(subscripts, *map(_as_cupy, operands), out=None if out is None else _as_cupy(out), **options)
    return out if out is not None else _as_caller_type(result, foreign)


def _as_cupy(x):
    import cupy
    if kind_of(x) is not None:
        return x
    return cupy.asarray(x) if hasattr(x, "__cuda_array_interface__") else cupy.from_dlpack(x)


def _as_caller_type(result, like):
    """``result`` as ``like``'s array type through its array-API namespace, else the CuPy array."""
    namespace = getattr(like, "__array_namespace__", None)
    return namespace().from_dlpack(result) if namespace is not None else result


# Planning ------------------------------------------------------------------------------------------------
class _Program:
    """An einsum planned for one signature: its contraction steps, each bound to its kernel.

    Values are numbered as :func:`_schedule` numbers them — the operands, the 0-d ones tensor (B of
    one-operand steps; None where no step has one), then the intermediates as they are made. A step
    ``(a, b, run, new, shape)`` reads values ``a`` and ``b`` and writes the next value into ``new()``, a new
    ``shape`` array on the caller's current stream (in graph memory while that stream is being captured);
    the last step, ``(a, b, run)``, writes the result."""
    __slots__ = ("_middle", "_last", "_one", "_first_made", "_new_result", "_direct", "_kind", "_device", "_dtype")

    def __init__(self, subscripts, operands, out, beta_nonzero, op_a, op_b, op_out, compute_type, optimize):
        n = len(operands)
        if n == 0:
            raise ValueError("must specify the einstein sum subscripts string and at least one operand")
        if (n > 2 and op_a is not None) or (n != 2 and op_b is not None):
            raise ValueError(f"op_a and op_b apply to the first and second operand of a one- or two-operand "
                             f"einsum; {subscripts!r} has {n}")
        if beta_nonzero and out is None:
            raise ValueError("beta ≠ 0 adds beta · out to the result, but no out= was given")
        kind = _common_kind(operands, out)
        infos = [_describe(x, f"operand {k}") for k, x in enumerate(operands)]
        out_info = None if out is None else _describe(out, "out")
        device = _common_device(infos + ([] if out_info is None else [out_info]))
        dtype = _common_dtype(infos)
        expr = parse(subscripts, tuple(len(i.shape) for i in infos))
        extents = _extents(expr, infos)
        views = [_operand_view(labels, info, extents) for labels, info in zip(expr.inputs, infos)]
        shape = tuple(extents[m] for m in expr.output)
        terms = [labels for labels, _, _ in views]
        steps, labels = _schedule(terms, expr.output, _path(terms, expr.output, extents, optimize))
        labels = _layouts(steps, labels, expr.output, n)
        descs = {k: desc for k, (_, desc, _) in enumerate(views)}
        descs[n], labels[n] = TensorDescriptor((), (), dtype), ()
        strided = {k: view for k, (_, _, view) in enumerate(views)}
        arch = _device_arch(device)
        program = []
        for number, (ins, result) in enumerate(steps):
            last = number == len(steps) - 1
            a, b = ins if len(ins) == 2 else (ins[0], n)
            descs[result] = (_output_descriptor(out_info, shape, dtype) if last else
                             _row_major(tuple(extents[m] for m in labels[result]), dtype))
            plan = plan_contraction(descs[a], labels[a], descs[b], labels[b], descs[result], labels[result],
                                    compute_type=compute_type, beta=int(last and beta_nonzero),
                                    op_a=op_a if a == 0 else None, op_b=op_b if b == 1 else None,
                                    op_out=op_out if last else None, device_arch=arch)
            program.append((a, b, _runner(kind, plan, (strided.get(a), strided.get(b)), device),
                            kind.allocator(descs[result].shape, operands[0].dtype, device), descs[result].shape))
        self._middle = tuple(program[:-1])
        a, b, run, self._new_result, _ = program[-1]
        self._last = (a, b, run)
        self._kind, self._device, self._dtype = kind, device, operands[0].dtype
        self._one = kind.constant_one(operands[0].dtype, device) if any(len(i) == 1 for i, _ in steps) else None
        self._first_made = n + 1
        # one contraction of two operands: it reads them as they are passed, nothing to make first
        self._direct = not self._middle and self._one is None

    def __call__(self, operands, out, alpha, beta):
        """Run on ``operands`` (of the signature planned for) into ``out``, or a new array if None;
        returns the result."""
        if self._direct:
            values, graph_memory = operands, None
        else:
            graph_memory = {}
            values = self._inputs(operands, graph_memory)
        if out is None:
            out = self._new_result()
        a, b, run = self._last
        run(values[a], values[b], out, out, alpha, beta)
        if graph_memory:
            for free in graph_memory.values():
                free()
        return out

    def _inputs(self, operands, graph_memory: dict) -> list:
        """The values the last step reads from: the operands, the ones tensor, the intermediates. While
        the stream is captured into a CUDA graph, intermediates live in memory the graph allocates;
        ``graph_memory`` is left holding the frees of those the last step reads."""
        values = [*operands, self._one]
        first_made = self._first_made
        graph = self._middle and self._kind.capturing(self._device)
        for x, y, step, new, shape in self._middle:
            if graph:
                d, graph_memory[len(values)] = self._kind.graph_array(shape, self._dtype, graph, self._device)
            else:
                d = new()
            step(values[x], values[y], d, d, 1, 0)
            values.append(d)
            for v in (x, y):
                if v >= first_made:   # an intermediate is read once: hand it back
                    values[v] = None
                    if v in graph_memory:
                        graph_memory.pop(v)()
        return values


def _describe(x, name: str):
    try:
        return describe(x)
    except (TypeError, ValueError) as e:   # keep the class (DTypeError, StrideError), name the array
        raise type(e)(f"{name}: {e}") from None


def _common_kind(operands, out):
    kinds = {kind_of(x).name: type(x).__name__ for x in operands + (() if out is None else (out,))}
    if len(kinds) > 1:
        raise TypeError(f"gett.einsum needs operands (and out) of one kind, got {', '.join(kinds.values())}")
    return kind_of(operands[0])


def _common_device(infos) -> int:
    devices = {i.device for i in infos}
    if len(devices) > 1:
        where = ", ".join(sorted(f"cuda:{d}" for d in devices))
        raise DeviceError(f"gett.einsum needs operands (and out) on one device, got {where}")
    return devices.pop()


def _common_dtype(infos):
    dtypes = {i.dtype for i in infos}
    if len(dtypes) > 1:
        names = ", ".join(sorted(d.name for d in dtypes))
        raise DTypeError(f"gett.einsum needs operands of one dtype, got {names}; cast them first")
    return dtypes.pop()


def _extents(expr, infos) -> dict:
    """The extent of every label: equal wherever it is not 1 (1 broadcasts), equal within one operand."""
    extents, first = {}, {}
    for k, (labels, positions, info) in enumerate(zip(expr.inputs, expr.positions, infos)):
        own = {}
        for label, pos, e in zip(labels, positions, info.shape):
            if own.setdefault(label, e) != e:
                raise ExtentMismatchError(
                    f"dimensions in operand {k} for collapsing index {describe_label(label)} don't match "
                    f"({own[label]} != {e}): position {pos} of {expr.subscripts!r}")
            seen = extents.setdefault(label, e)
            if e == 1 or seen == e:
                first.setdefault(label, (k, pos))
                continue
            if seen != 1:
                k0, p0 = first[label]
                raise ExtentMismatchError(
                    f"einstein sum subscript {describe_label(label)} has extent {e} in operand {k} (position "
                    f"{pos} of {expr.subscripts!r}) but {seen} in operand {k0} (position {p0}); extents must "
                    f"match or be 1")
            extents[label], first[label] = e, (k, pos)
    return extents


def _operand_view(labels, info, extents) -> tuple:
    """(labels, descriptor, view) of an operand as its contraction reads it: a repeated label becomes one
    axis whose stride is the sum of its strides; an axis of extent 1 that broadcasts is dropped. ``view``
    is (shape, element strides), or None when the operand is read as it is."""
    shape, strides, axis = [], [], {}
    for label, e, s in zip(labels, info.shape, info.strides):
        if e == 1 and extents[label] != 1:
            continue
        if label in axis:
            strides[axis[label]] += s
        else:
            axis[label] = len(shape)
            shape.append(e)
            strides.append(s)
    desc = TensorDescriptor(shape, strides, info.dtype, alignment=info.alignment)
    return tuple(axis), desc, None if len(shape) == len(labels) else (tuple(shape), tuple(strides))


def _output_descriptor(info, shape, dtype) -> TensorDescriptor:
    """The result's layout: ``out``'s, checked against the result, or row-major."""
    if info is None:
        return _row_major(shape, dtype)
    if info.shape != shape:
        raise ValueError(f"out has shape {info.shape}, the einsum's result has shape {shape}")
    if not info.writable:
        raise OutputNotWritableError("out is read-only")
    return TensorDescriptor(info.shape, info.strides, info.dtype, alignment=info.alignment)


def _row_major(shape, dtype) -> TensorDescriptor:
    """The layout of a new array; an empty one has no element to step to, so its strides are 0."""
    return TensorDescriptor(shape, (0,) * len(shape) if 0 in shape else None, dtype)


def _path(terms, output, extents, optimize) -> list:
    """The contraction path: the one step for one or two operands; else ``optimize`` if it is a path,
    or opt_einsum's path for that strategy."""
    if len(terms) <= 2:
        return [tuple(range(len(terms)))]
    if isinstance(optimize, (list, tuple)):   # an explicit path (numpy's form starts with "einsum_path")
        return [tuple(step) for step in optimize[1 if optimize and optimize[0] == "einsum_path" else 0:]]
    import opt_einsum
    symbols: dict = {}
    for labels in terms:
        for m in labels:
            symbols.setdefault(m, opt_einsum.get_symbol(len(symbols)))
    equation = ",".join("".join(symbols[m] for m in t) for t in terms) + "->" + "".join(symbols[m] for m in output)
    shapes = [tuple(extents[m] for m in t) for t in terms]
    path, _ = opt_einsum.contract_path(equation, *shapes, shapes=True, optimize=optimize)
    return [tuple(step) for step in path]


def _schedule(terms, output, path) -> tuple:
    """Pairwise steps ``[(inputs, result)]`` and every value's labels, from an opt_einsum-style path
    (positions in a list that loses the values a step reads and gains its result at the end; a step
    of k > 2 values runs pairwise, left to right). Operands are values 0..n-1, value n is the ones
    tensor, results are n+1, n+2, ...; a result keeps the labels a later step or the output needs."""
    n = len(terms)
    labels = dict(enumerate(terms))
    work, steps, made = list(range(n)), [], n
    for group in path:
        if not group or len(set(group)) < len(group) or any(not 0 <= i < len(work) for i in group):
            raise ValueError(f"invalid contraction path {path}: step {group} for {len(work)} tensors")
        ids = [work[i] for i in group]
        work = [v for i, v in enumerate(work) if i not in group]
        while ids:
            ins, ids = tuple(ids[:2]), ids[2:]
            needed = set(output).union(*(labels[v] for v in work + ids))
            made += 1
            labels[made] = tuple(dict.fromkeys(m for v in ins for m in labels[v] if m in needed))
            steps.append((ins, made))
            if ids:
                ids.insert(0, made)
            else:
                work.append(made)
    if len(work) != 1:
        raise ValueError(f"invalid contraction path {path}: it leaves {len(work)} tensors")
    return steps, labels


def _layouts(steps, labels, output, n) -> dict:
    """The axis order of every value: operands as they are, the result as ``output``, each intermediate
    as the step that reads it reads well — batch labels, then the labels it keeps in its output's
    order, then the summed labels in the other input's order (innermost, so they merge in both)."""
    order = {v: labels[v] for v in range(n)}
    order[steps[-1][1]] = tuple(output)
    for ins, result in reversed(steps):
        kept = order[result]
        for x in ins:
            if x in order:
                continue
            other = next((order.get(v, labels[v]) for v in ins if v != x), ())
            mine = set(labels[x])
            picked = ([m for m in kept if m in mine and m in other] +          # batch
                      [m for m in kept if m in mine and m not in other] +      # kept
                      [m for m in other if m in mine and m not in kept])       # summed
            order[x] = tuple(picked) + tuple(m for m in labels[x] if m not in picked)
    return order


def _device_arch(device: int):
    """``sm_XY`` of CUDA device ``device`` (kernels are compiled at plan time); None for host arrays."""
    if device < 0:
        return None
    import cupy
    from .kernel import current_arch
    with cupy.cuda.Device(device):
        return current_arch()
