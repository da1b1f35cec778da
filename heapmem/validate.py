"""What valid input is: the checks every entry point runs on its arguments,
and the limits they enforce.

Owns: the limits' Python names (MAX_TEXT_BYTES, MAX_ANSWER_BYTES, MAX_NAME_CHARS, MAX_K,
MAX_NAMESPACES, MIN_TIME, MAX_TIME and MAX_TURN; their values are csrc/heapmem.h's
HM_LIMITS, read through db.native, and the C entry points check the same), the reserved name of the
pooled layer (POOLED), and one check per kind of argument (a name, a
namespace, a database's name on a server, a memory's text, its thread and
turn, a list of ids, a timestamp).  It keeps what the C core cannot see: Python's types and
datetimes; every bound it checks, the core checks too.  Each raises TypeError or
ValueError with a sentence that tells the caller what to do.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Union

from .db import native
from .db.native import LIMITS

#: Longest memory text accepted, in UTF-8 bytes.
MAX_TEXT_BYTES = int(LIMITS["MAX_TEXT_BYTES"])
#: Longest id, namespace, kind, source or key, in characters.
MAX_NAME_CHARS = int(LIMITS["MAX_NAME_CHARS"])
#: Most memories one recall may return.
MAX_K = int(LIMITS["MAX_K"])
#: Most namespaces one recall may rank across.
MAX_NAMESPACES = int(LIMITS["MAX_NAMESPACES"])
#: The highest turn a memory may have in its thread (csrc/heapmem.h's HM_MAX_TURN).
MAX_TURN: int = native.lib.HM_MAX_TURN
#: The namespace name of the pooled layer of links (reserved).
POOLED = "*"

Timestamp = Union[int, float, datetime]


#: The earliest time accepted, in unix seconds: 1970-01-01T00:00:00Z.  A
#: memory is stated, used or recalled by a running program, never before the
#: epoch.
MIN_TIME = float(LIMITS["MIN_TIME"])
#: The latest time accepted, in unix seconds: 9999-12-31T23:59:59Z, the last
#: whole second Python's datetime can show (year 10000 is out of its range).
#: Every time the store keeps and the C library's day arithmetic reads is in
#: [MIN_TIME, MAX_TIME].
MAX_TIME = float(LIMITS["MAX_TIME"])


def seconds(x: Any, what: str) -> float:
    """x (unix seconds, an int or a float, a datetime, or an ISO 8601 string:
    naive ones are UTC) as
    unix seconds, a float from MIN_TIME to MAX_TIME.  Raises TypeError for
    another type, ValueError (naming `what`) for NaN, an infinity or a time
    outside that range (before 1970, or after the year 9999)."""
    if isinstance(x, str):  # an ISO 8601 date or time, as the CLI takes them
        try:
            x = datetime.fromisoformat(x.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{what} must be unix seconds, a datetime or an ISO 8601 date "
                             f"such as '2025-03-14' or '2025-03-14T09:40:00Z', got {x!r}") \
                from None
    if isinstance(x, datetime):
        if x.tzinfo is None:
            x = x.replace(tzinfo=timezone.utc)
        v = x.timestamp()
    elif isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{what} must be unix seconds (int or float) or a datetime, "
                        f"got {type(x).__name__}")
    else:
        try:
            v = float(x)
        except OverflowError:  # an int beyond float range
            v = math.inf if x > 0 else -math.inf
    if not (MIN_TIME <= v <= MAX_TIME):  # NaN too
        if isinstance(x, datetime):
            shown = x.isoformat()
        elif isinstance(x, int):
            shown = str(x) if math.isfinite(v) else "an integer beyond float range"
        else:
            shown = repr(v)
        raise ValueError(f"{what} must be a finite number of unix seconds from {MIN_TIME:.0f} "
                         f"to {MAX_TIME:.0f} (1970 to the year 9999), got {shown}")
    return v


def _check_encoding(value: str, what: str) -> int:
    """value's size in bytes of UTF-8, after checking it has one (no lone
    surrogate: what Python's str can hold and no UTF-8 can) and no NUL byte,
    in the core's words (csrc/sqlfuncs.c hm_check_text)."""
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        data = b"\x00"
    if b"\x00" in data:
        raise ValueError(f"{what} must be valid UTF-8 without NUL bytes")
    return len(data)


def python_text(value: Any, what: str, *, optional: bool = False) -> Any:
    """What the C core cannot see of a text argument it checks itself
    (heap_add, heap_add_many): that it is a str (or None where optional),
    and one UTF-8 can hold (no lone surrogate).  Its value (empty, too long,
    a NUL in a name) is the core's to refuse."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid UTF-8 without NUL bytes") from None
    return value


def check_name(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    _check_encoding(value, what)
    return value


def check_thread(thread: Any, turn: Any) -> tuple[str | None, int | None]:
    """A memory's place in a conversation: thread (a name, or None: no thread)
    and turn (a whole number from 0 to MAX_TURN, or None: with a thread, its
    next turn).  A turn needs a thread."""
    thread = check_name(thread, "thread", optional=True)
    if turn is None:
        return thread, None
    if isinstance(turn, bool) or not isinstance(turn, int):
        raise TypeError(f"turn must be a whole number (the memory's place in its thread), got "
                        f"{type(turn).__name__}")
    if not 0 <= turn <= MAX_TURN:
        raise ValueError(f"turn must be a whole number from 0 to {MAX_TURN} (the memory's place "
                         f"in its thread), got {turn}")
    if thread is None:
        raise ValueError("turn needs a thread: name the conversation the memory is a turn of")
    return thread, turn


def check_namespace(ns: Any) -> str:
    ns = check_name(ns, "namespace")
    if ns == POOLED:
        raise ValueError("namespace '*' is reserved for the pooled layer of learned links")
    return ns


def check_namespaces(spaces: Any) -> tuple[str, ...]:
    """The namespaces of a recall across them: a list or tuple of 1 to
    MAX_NAMESPACES distinct namespaces (the core's heap_recall checks the
    same, in the same words)."""
    if not isinstance(spaces, (list, tuple)):
        raise TypeError(f"namespace must be a string, or a list of namespaces to recall across, "
                        f"got {type(spaces).__name__}")
    if not spaces:
        raise ValueError("namespaces must be a list of one or more namespaces, such as "
                         "['user:maya', 'team']")
    if len(spaces) > MAX_NAMESPACES:
        raise ValueError(f"namespaces lists more than {MAX_NAMESPACES} namespaces")
    names = tuple(check_namespace(ns) for ns in spaces)
    if len(set(names)) < len(names):
        twice = min(ns for ns in names if names.count(ns) > 1)
        raise ValueError(f"namespaces names {twice} twice")
    return names


#: A database's name on a libSQL server with namespaces: a DNS label.
DATABASE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def check_database(name: Any) -> str:
    """A database's name on a libSQL server with namespaces (one database per
    tenant).  sqld itself takes any non-empty name, but finds the database a
    request goes to from the first label of its Host header, so a name must
    be one a host name can carry unchanged: a DNS label, 1 to 63 lowercase
    letters, digits and hyphens, neither first nor last a hyphen (host names
    are compared without case, sqld's names with it; a dot would end the
    label)."""
    if not isinstance(name, str):
        raise TypeError(f"database must be a string (a database's name on the server), got "
                        f"{type(name).__name__}")
    if not DATABASE_NAME.fullmatch(name):
        raise ValueError(f"database {name!r} is not a valid name: use 1 to 63 lowercase letters, "
                         "digits and hyphens, not starting or ending with a hyphen (sqld reads "
                         "it off the Host header, so it must be a DNS label)")
    return name


def _check_string(value: Any, what: str, limit: int, typename: str, hint: str) -> str:
    """A non-empty string with no NUL or lone surrogate, at most limit bytes of UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string{typename}, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty or only whitespace")
    size = _check_encoding(value, what)
    if size > limit:
        raise ValueError(f"{what} is {size} bytes of UTF-8; the limit is {limit}{hint}")
    return value


def check_text(text: Any) -> str:
    return _check_string(text, "text", MAX_TEXT_BYTES, "", " (1 MiB)")


#: The longest answer feedback(answer=...) reads (an answer, not a document).
MAX_ANSWER_BYTES = int(LIMITS["MAX_ANSWER_BYTES"])


def check_answer(answer: Any) -> str:
    return _check_string(answer, "answer", MAX_ANSWER_BYTES, " (the agent's answer)",
                         " (64 KiB): pass the answer, not a document")


def check_recall_id(recall_id: Any) -> int | None:
    """A recall_id as feedback reads it: None stays None, a string of digits
    is its number; anything but an integer is a TypeError, one SQLite cannot
    hold an unknown recall (ValueError)."""
    if recall_id is None:
        return None
    if isinstance(recall_id, str) and recall_id.strip().isdigit():
        recall_id = int(recall_id)
    if isinstance(recall_id, bool) or not isinstance(recall_id, int):
        raise TypeError(f"recall_id must be an integer, got {type(recall_id).__name__}")
    if not -(1 << 63) <= recall_id < (1 << 63):  # SQLite integers are 64-bit
        raise ValueError(f"unknown recall_id {recall_id} (never recorded, or forgotten)")
    return recall_id


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


def check_filters(kinds: Any, since: Any, until: Any) -> dict[str, Any]:
    """recall()'s filters as heap_recall's kinds, since and until: kinds a
    kind or a list of kinds (None: every kind) as a JSON array; since and
    until as unix seconds (None: no bound), since before until."""
    js = None
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        try:
            names = list(names)
        except TypeError:
            raise TypeError(f"kinds must be a kind or a list of kinds, got "
                            f"{type(kinds).__name__}") from None
        if not names:
            raise ValueError("kinds must name at least one kind (None: every kind)")
        js = json.dumps([check_name(k, "a kind in kinds") for k in names])
    lo = None if since is None else seconds(since, "since")
    hi = None if until is None else seconds(until, "until")
    if lo is not None and hi is not None and not lo < hi:
        raise ValueError("since must be before until (recall keeps the memories created at or "
                         "after since, and before until)")
    return {"kinds": js, "since": lo, "until": hi}
