"""gett's two in-memory caches — contraction plans (:func:`gett.plan_contraction`) and einsum plans
(:func:`gett.einsum`) — as bounded, thread-safe LRU maps, and the public controls over them.

Each cache holds at most ``GETT_PLAN_CACHE_SIZE`` entries (environment, read at import; default 1024)
or what :func:`set_cache_size` sets; the least recently used entry goes first. Compiled kernels live
on in the disk cache, so an evicted plan costs a re-plan, not a re-compile.
"""
from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from typing import Any, NamedTuple

DEFAULT_SIZE = 1024


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int
    maxsize: int


class LRUCache:
    """A dictionary of at most ``maxsize`` entries that forgets the least recently used one first.

    A hit on the entry the last hit found returns it without a lookup: that entry is the most recent
    already (a loop of one cached call pays one key comparison, not two hashes of its key)."""

    def __init__(self, maxsize: int):
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._maxsize = _check_size(maxsize)
        self._hits = self._misses = 0
        self._newest = _NONE   # (key, value) of the last hit, while it is the most recent entry

    def get(self, key, default=None) -> Any:
        with self._lock:
            newest, value = self._newest
            if key != newest:
                value = self._data.get(key, _MISSING)
                if value is _MISSING:
                    self._misses += 1
                    return default
                self._data.move_to_end(key)
                self._newest = (key, value)
            self._hits += 1
            return value

    def put(self, key, value) -> Any:
        """Store ``value`` unless another thread stored one under ``key`` first; return the one kept."""
        with self._lock:
            kept = self._data.setdefault(key, value)
            self._data.move_to_end(key)
            self._newest = _NONE
            while len(self._data) > self._maxsize:
                self._data.popitem(last=False)
            return kept

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._hits = self._misses = 0
            self._newest = _NONE

    def resize(self, maxsize: int) -> None:
        with self._lock:
            self._maxsize = _check_size(maxsize)
            self._newest = _NONE
            while len(self._data) > self._maxsize:
                self._data.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._data), self._maxsize)

    def __len__(self) -> int:
        return len(self._data)


_MISSING = object()
_NONE = (_MISSING, None)   # no last hit


def _check_size(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"a cache size must be an integer ≥ 0, got {n!r}")
    return n


def _size_from_environment() -> int:
    """GETT_PLAN_CACHE_SIZE, or the default with a warning when it is not an integer ≥ 0."""
    text = os.environ.get("GETT_PLAN_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE
    try:
        return _check_size(int(text))
    except ValueError:
        warnings.warn(f"GETT_PLAN_CACHE_SIZE={text!r} is not an integer ≥ 0; using {DEFAULT_SIZE}")
        return DEFAULT_SIZE


PLANS = LRUCache(_size_from_environment())      # signature -> ContractionPlan
EINSUM = LRUCache(_size_from_environment())     # einsum call signature -> compiled einsum program


# (id(plan), signatures of A, B, C, D) -> (launcher, plan) of gett.contract's GPU calls that passed every
# check: a repeated call with arrays of the same kind, shape, strides, dtype, alignment, device (and, for
# D, writability) skips the checks. The entry holds the plan, so its id names no other plan while it is
# kept; hashing the plan itself would hash its whole signature on every call.
ACCEPTED = LRUCache(4096)


def cache_info() -> CacheInfo:
    """Hits, misses, size and maximum size of the einsum plan cache (the one behind :func:`gett.einsum`)."""
    return EINSUM.info()


def clear_cache() -> None:
    """Forget every cached einsum plan and contraction plan, and the checked calls of ``gett.contract``
    (which keep their plans alive); compiled kernels stay in the disk cache."""
    EINSUM.clear()
    PLANS.clear()
    ACCEPTED.clear()


def set_cache_size(n: int) -> None:
    """Keep at most ``n`` entries in each cache (0 disables caching); evicts at once if over."""
    EINSUM.resize(n)
    PLANS.resize(n)
