"""Exceptions raised by gett.

Every error a user can cause is raised at plan time (or, for arrays that do not match a plan, at the
start of ``contract``) before anything is written to the output. Each class derives from the builtin
exception a Python user would expect (``ValueError`` or ``TypeError``) and from :class:`GettError`, so
``except ValueError`` and ``except gett.GettError`` both work.
"""


class GettError(Exception):
    """Base class of every exception gett raises on purpose."""


class ModeError(GettError, ValueError):
    """Modes do not describe a valid contraction (unknown, repeated, or a count that differs from ndim)."""


class ExtentMismatchError(ModeError):
    """One mode has different extents in two tensors."""


class StrideError(GettError, ValueError):
    """Strides a kernel cannot honour: negative or self-overlapping output strides, non-element strides."""


class DTypeError(GettError, TypeError):
    """An unsupported dtype, or a combination of dtypes and compute type gett does not implement."""


class PlanMismatchError(GettError, ValueError):
    """Arrays passed to ``contract`` differ from the ones the plan was built for."""


class DeviceError(GettError, ValueError):
    """Arrays on different devices, no CUDA device where one is needed, or an unsupported architecture."""


class OutputNotWritableError(GettError, ValueError):
    """The output array is read-only."""


class UnsupportedOperation(GettError, ValueError):
    """A Python function given as an elementwise op uses a construct gett cannot translate."""


class CompileError(GettError, RuntimeError):
    """NVRTC rejected a generated kernel; the message includes the path of the kept source."""
