"""The attention key/value cache: run-time state that a compiled decode loop grows token by token.

Compiled functions reach it through registered functions, named as the reference compiler names
them, called with ``R.call_pure_packed`` / ``R.call_packed``:

    cache = vm.builtin.attention_kv_cache_create(init, reserve_shape, fill_count)
    cache = vm.builtin.attention_kv_cache_append(cache, value)     # rows added at the end
    whole = vm.builtin.attention_kv_cache_view(cache, shape)       # shape[0] == rows filled

A cache holds rows of one shape and dtype (e.g. (heads, head_dim) float32) in one array whose
first axis is the capacity. Appending copies only the new rows; when they do not fit, the
capacity doubles (as often as needed) and the filled rows move once, so n appends of one row
cost O(n) copies in all. A view is the filled rows themselves, without a copy: rows appended
later land after them, and a reallocation leaves the viewed array as it was.

    >>> import numpy as np
    >>> cache = AttentionKVCache.create(np.zeros((0, 2), "float32"), (2, 2))
    >>> for step in range(3):
    ...     cache = attention_kv_cache_append(cache, np.full((1, 2), step, "float32"))
    >>> cache.fill_count, cache.capacity
    (3, 4)
    >>> attention_kv_cache_view(cache, (3, 2)).numpy()[:, 0].tolist()
    [0.0, 1.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from .ndarray import NDArray
from .packed import register_func


class KVCacheError(ValueError):
    """A value that does not fit a cache (shape, dtype) or a view of rows it does not hold."""


class AttentionKVCache:
    """Rows of shape ``row_shape`` and dtype ``dtype``; ``fill_count`` of them are valid."""

    _count = 0

    def __init__(self, data: np.ndarray, fill_count: int, device, name: str | None = None):
        AttentionKVCache._count += 1
        self.data, self.fill_count, self.device = data, fill_count, device
        self.name = name or f"kv_cache#{AttentionKVCache._count}"

    @classmethod
    def create(cls, init, reserve_shape, fill_count: int = -1, name: str | None = None):
        """A cache with room for ``reserve_shape[0]`` rows of shape ``reserve_shape[1:]``,
        holding ``init``'s rows first. ``fill_count`` >= 0 then sets how many rows count as
        filled (0: ``init`` only gives the dtype and row shape); a negative one keeps them all."""
        init_array = _host_array(init, "attention_kv_cache_create: the initial value")
        reserve = tuple(int(d) for d in reserve_shape)
        if not reserve or reserve[0] < 0:
            raise KVCacheError(f"attention_kv_cache_create: the reserve shape {reserve} needs a "
                               "first axis (the number of rows) of at least 0")
        capacity = max(reserve[0], 1)
        data = np.empty((capacity,) + reserve[1:], init_array.dtype)
        cache = cls(data, 0, getattr(init, "device", None), name)
        cache.append(init_array)
        if fill_count is not None and int(fill_count) >= 0:
            if int(fill_count) > cache.fill_count:
                raise KVCacheError(f"attention_kv_cache_create: fill count {int(fill_count)} is "
                                   f"more than the {cache.fill_count} row(s) of the initial value")
            cache.fill_count = int(fill_count)
        return cache

    @property
    def capacity(self) -> int:
        return self.data.shape[0]

    @property
    def row_shape(self) -> tuple:
        return tuple(self.data.shape[1:])

    @property
    def dtype(self) -> str:
        return self.data.dtype.name

    def append(self, value) -> "AttentionKVCache":
        """Copy ``value``'s rows (shape (k, *row_shape), the cache's dtype) after the filled
        ones; returns the cache itself."""
        array = _host_array(value, f"attention_kv_cache_append on {self.name}")
        if array.dtype != self.data.dtype:
            raise KVCacheError(f"attention_kv_cache_append: {self.name} holds {self.dtype} rows, "
                               f"cannot append a {array.dtype.name} value; the dtypes must match")
        if array.ndim != self.data.ndim or tuple(array.shape[1:]) != self.row_shape:
            raise KVCacheError(f"attention_kv_cache_append: {self.name} holds rows of shape "
                               f"{self.row_shape}, so an appended value must have shape "
                               f"(rows, {', '.join(map(str, self.row_shape))}); got "
                               f"{tuple(array.shape)}")
        rows = array.shape[0]
        needed = self.fill_count + rows
        if needed > self.capacity:
            capacity = self.capacity
            while capacity < needed:
                capacity *= 2
            grown = np.empty((capacity,) + self.row_shape, self.data.dtype)
            grown[:self.fill_count] = self.data[:self.fill_count]
            self.data = grown
        self.data[self.fill_count:needed] = array
        self.fill_count = needed
        return self

    def view(self, shape=None) -> NDArray:
        """The filled rows as one tensor (no copy). ``shape``, when given, must be
        (fill_count, *row_shape): a compiled function states the length it expects."""
        want = (self.fill_count,) + self.row_shape
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            if shape != want:
                what = (f"the first axis must be the {self.fill_count} row(s) filled"
                        if len(shape) == len(want) and shape[1:] == want[1:] else
                        f"the rows have shape {self.row_shape}")
                raise KVCacheError(f"attention_kv_cache_view: cannot view {self.name} as shape "
                                   f"{shape}: {what}, i.e. shape {want}")
        return NDArray(self.data[:self.fill_count], self.device)

    def pop(self, rows: int) -> None:
        """Forget the last ``rows`` rows."""
        if not 0 <= rows <= self.fill_count:
            raise KVCacheError(f"attention_kv_cache_popn: {self.name} holds {self.fill_count} "
                               f"row(s), cannot pop {rows}")
        self.fill_count -= rows

    def clear(self) -> None:
        """Forget every row (the capacity stays)."""
        self.fill_count = 0

    def __repr__(self) -> str:
        return (f"<AttentionKVCache {self.name}: {self.fill_count}/{self.capacity} rows of "
                f"{self.row_shape} {self.dtype}>")


def _host_array(value, what: str) -> np.ndarray:
    if isinstance(value, NDArray):
        return value.numpy_view()
    if isinstance(value, np.ndarray):
        return value
    raise TypeError(f"{what}: expected a tensor (an NDArray or numpy array), got "
                    f"{type(value).__name__}")


def _cache(value, what: str) -> AttentionKVCache:
    if not isinstance(value, AttentionKVCache):
        raise TypeError(f"{what}: expected the cache that attention_kv_cache_create made, got "
                        f"{type(value).__name__}")
    return value


@register_func("vm.builtin.attention_kv_cache_create")
def attention_kv_cache_create(init, reserve_shape, fill_count=-1) -> AttentionKVCache:
    return AttentionKVCache.create(init, reserve_shape, fill_count)


@register_func("vm.builtin.attention_kv_cache_append")
def attention_kv_cache_append(cache, value) -> AttentionKVCache:
    return _cache(cache, "attention_kv_cache_append").append(value)


@register_func("vm.builtin.attention_kv_cache_view")
def attention_kv_cache_view(cache, shape=None) -> NDArray:
    return _cache(cache, "attention_kv_cache_view").view(shape)


@register_func("vm.builtin.attention_kv_cache_array_popn")
def attention_kv_cache_array_popn(caches, rows) -> None:
    for cache in caches:
        _cache(cache, "attention_kv_cache_array_popn").pop(int(rows))


@register_func("vm.builtin.attention_kv_cache_array_clear")
def attention_kv_cache_array_clear(caches) -> None:
    for cache in caches:
        _cache(cache, "attention_kv_cache_array_clear").clear()


__all__ = ["AttentionKVCache", "KVCacheError", "attention_kv_cache_append",
           "attention_kv_cache_array_clear", "attention_kv_cache_array_popn",
           "attention_kv_cache_create", "attention_kv_cache_view"]
