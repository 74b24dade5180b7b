"""The TCCG benchmark suite of 48 tensor contractions, and the ``gett-tccg`` runner that measures gett
against cuTENSOR, ``torch.einsum`` and ``cupy.einsum`` on it (see :mod:`tccg_suite.runner`).

Importing the package needs neither a GPU nor gett.
"""

from .suite import GROUP_NAMES, GROUPS, Contraction, load_suite, parse_ids, select

__all__ = ["GROUPS", "GROUP_NAMES", "Contraction", "load_suite", "parse_ids", "select"]
