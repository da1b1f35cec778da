"""What valid input is: the checks every entry point runs on its arguments,
and the limits they enforce.

Owns: the limits (MAX_TEXT_BYTES, MAX_ANSWER_BYTES, MAX_NAME_CHARS, MAX_K), the reserved name of
the pooled layer (POOLED), and one check per kind of argument (a name, a
namespace, a memory's text, a list of ids, a timestamp).  Each raises
TypeError or ValueError with a sentence that tells the caller what to do.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Union

#: Longest memory text accepted, in UTF-8 bytes.
MAX_TEXT_BYTES = 1 << 20
#: Longest id, namespace, kind, source or key, in characters.
MAX_NAME_CHARS = 256
#: Most memories one recall may return.
MAX_K = 1000
#: The namespace name of the pooled layer of links (reserved).
POOLED = "*"

Timestamp = Union[int, float, datetime]


def seconds(x: Any, what: str) -> float:
    if isinstance(x, datetime):
        if x.tzinfo is None:
            x = x.replace(tzinfo=timezone.utc)
        return x.timestamp()
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{what} must be unix seconds (int or float) or a datetime, "
                        f"got {type(x).__name__}")
    try:
        v = float(x)
    except OverflowError:  # an int beyond float range
        v = math.inf
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number of unix seconds, got {x!r}")
    return v


def check_name(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode (it holds a lone surrogate)") from None
    return value


def check_namespace(ns: Any) -> str:
    ns = check_name(ns, "namespace")
    if ns == POOLED:
        raise ValueError("namespace '*' is reserved for the pooled layer of learned links")
    return ns  # type: ignore[return-value]


def _check_string(value: Any, what: str, limit: int, typename: str, hint: str) -> str:
    """A non-empty string with no NUL or lone surrogate, at most limit bytes of UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string{typename}, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty or only whitespace")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode (it holds a lone surrogate)") from None
    if size > limit:
        raise ValueError(f"{what} is {size} bytes of UTF-8; the limit is {limit}{hint}")
    return value


def check_text(text: Any) -> str:
    return _check_string(text, "text", MAX_TEXT_BYTES, "", " (1 MiB)")


#: The longest answer feedback(answer=...) reads (an answer, not a document).
MAX_ANSWER_BYTES = 64 * 1024


def check_answer(answer: Any) -> str:
    return _check_string(answer, "answer", MAX_ANSWER_BYTES, " (the agent's answer)",
                         " (64 KiB): pass the answer, not a document")


def check_ids(ids: Any, what: str) -> list[str]:
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{what} must be a list of ids, not a single string; wrap it: {what}=[id]")
    try:
        out = list(ids)
    except TypeError:
        raise TypeError(f"{what} must be a list of ids, got {type(ids).__name__}") from None
    for i in out:
        if not isinstance(i, str):
            raise TypeError(f"{what} must hold string ids, got {type(i).__name__}")
    if len(set(out)) != len(out):
        raise ValueError(f"{what} lists the same id twice")
    return out
