"""Data types as plain strings ("float32", "int64", "bool", "float32x4") and helpers on them."""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

SCALAR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")
_PATTERN = re.compile(r"^(bool|int|uint|float|handle)(\d*)(?:x(\d+))?$")


def check_dtype(dtype: object) -> str:
    """Return ``dtype`` as a canonical string, or raise TypeError/ValueError naming the bad value."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a string such as 'float32', got {dtype!r}")
    m = _PATTERN.match(dtype)
    if m is None or (m.group(1) not in ("bool", "handle") and m.group(1) + m.group(2) not in SCALAR_DTYPES):
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(SCALAR_DTYPES)} "
                         f"(optionally with a vector suffix such as 'float32x4')")
    return dtype


# The predicates below are asked for every IR node a pass visits, of a handful of dtype strings:
# each answer is computed once.
@lru_cache(maxsize=None)
def lanes(dtype: str) -> int:
    m = _PATTERN.match(dtype)
    return int(m.group(3)) if m and m.group(3) else 1


def element_of(dtype: str) -> str:
    """'float32x4' -> 'float32'."""
    return dtype.split("x")[0] if "x" in dtype else dtype


def with_lanes(dtype: str, n: int) -> str:
    base = element_of(dtype)
    return base if n == 1 else f"{base}x{n}"


@lru_cache(maxsize=None)
def is_float(dtype: str) -> bool:
    return element_of(dtype).startswith("float")


@lru_cache(maxsize=None)
def is_int(dtype: str) -> bool:
    base = element_of(dtype)
    return base.startswith("int") or base.startswith("uint")


def is_bool(dtype: str) -> bool:
    return element_of(dtype) == "bool"


@lru_cache(maxsize=None)
def bits(dtype: str) -> int:
    base = element_of(dtype)
    return 1 if base == "bool" else int(re.sub(r"^\D+", "", base) or 64)


def to_numpy(dtype: str) -> np.dtype:
    base = element_of(dtype)
    if base == "handle":
        raise TypeError("a handle has no numpy dtype")
    return np.dtype(base)
