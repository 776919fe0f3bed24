"""The one place Python values are converted for the C APIs: names, paths and integers.

ctypes converts silently where C would not be asked: a ``str`` with a NUL is cut at the NUL by
``c_char_p`` (``set_param("a\\x00junk", 5)`` would set ``a``), and an int that does not fit is
wrapped by ``c_size_t``, ``c_void_p`` and ``c_int`` (``2**64`` becomes 0, the legacy default
stream; ``-1`` becomes ``2**64 - 1``). Every name and integer that crosses into C goes through
a function here first, which refuses such values with the argument's name.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from typing import Any, Mapping as MappingT, Optional

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1  # also SIZE_MAX and the largest address: orch is built for 64-bit Linux only


class OutOfRange(OverflowError, ValueError):
    """An integer that does not fit the C type it is passed as. An OverflowError, as Python's
    own conversions raise, and a ValueError, as orch raised for negative handles before."""


def c_name(value: Any, what: str) -> bytes:
    """`value` as a C string: a ``str`` without NUL characters, UTF-8. `what` names the
    argument ("`name`", "a key of `params`")."""
    if not isinstance(value, str):
        raise TypeError(f"orch: {what} is a name (str), not {type(value).__name__} {value!r}")
    if "\x00" in value:
        raise ValueError(f"orch: {what} contains a NUL character ({value!r}); a name ends at it in C, so it is refused")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 spelling
        raise ValueError(f"orch: {what} is not valid Unicode text: {value!r}") from None


def c_path(value: Any, what: str) -> bytes:
    """A path (str, bytes or os.PathLike) as a C string, refused if it contains a NUL."""
    try:
        raw = os.fsencode(value)
    except TypeError:
        raise TypeError(f"orch: {what} is a path (str or os.PathLike), not {type(value).__name__} {value!r}") from None
    if b"\x00" in raw:
        raise ValueError(f"orch: {what} contains a NUL character ({value!r}); a path ends at it in C, so it is refused")
    return raw


def c_int(value: Any, what: str, lo: int, hi: int, ctype: str) -> int:
    """`value` as an integer in [lo, hi] (the range of C type `ctype`), never wrapped. Python
    ints and integer-like objects (numpy integers) are taken; bools and floats are not."""
    if isinstance(value, bool):
        raise TypeError(f"orch: {what} is an integer, not bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"orch: {what} is an integer, not {type(value).__name__} {value!r}") from None
    if not lo <= v <= hi:
        raise OutOfRange(f"orch: {what} is {v}, outside the range of {ctype} [{lo}, {hi}]")
    return v


def c_size(value: Any, what: str) -> int:
    """A byte count or element count for size_t / uint64_t."""
    return c_int(value, what, 0, UINT64_MAX, "size_t")


def c_address(value: Any, what: str) -> int:
    """An address or a handle (a pointer: cudaStream_t, ncclComm_t, device memory)."""
    return c_int(value, what, 0, UINT64_MAX, "a 64-bit address")


def c_int32(value: Any, what: str) -> int:
    return c_int(value, what, INT32_MIN, INT32_MAX, "int32")


def mapping(value: Optional[MappingT[Any, Any]], what: str, of: str) -> MappingT[Any, Any]:
    """A ``{name: value}`` argument (None for none); a list of pairs or anything else is a
    TypeError rather than an AttributeError on ``.items()``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"orch: `{what}` is a mapping of names to {of} (a dict), not {type(value).__name__}")
    return value
