"""The compiled heapmem library: where it is, loading it into SQLite
connections, and its cffi (ABI mode) bindings.

Owns: the library's path (loadable_path), load(conn), the cffi declarations
and the vocabulary (limits, kinds, question types, the feature grammar: all
read from csrc/heapmem.h, shipped beside the library, never copied here) and
one thin, typed Python function per hm_* entry point.  The library SQLite
loads as an extension is the one dlopened here, so Python and raw SQL rank
with the very same C code.  numpy arrays are checked at the boundary.
"""
from __future__ import annotations

import functools
import io
import math
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from cffi import FFI

from ..errors import HeapmemError

if sys.platform == "darwin":
    SUFFIX = ".dylib"
elif sys.platform == "win32":
    SUFFIX = ".dll"
else:
    SUFFIX = ".so"


def _library_dir() -> str:
    """The folder that holds the compiled library and its header: this
    package's own, or, when this package is an unbuilt source tree (Python
    run from the repository's root after a plain `pip install .` imports
    heapmem/ from there), the installed copy of the same version."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # heapmem/, not db/
    if os.path.exists(os.path.join(here, "heapmem0" + SUFFIX)):
        return here
    from .._version import __version__
    for entry in sys.path:
        there = os.path.join(os.path.abspath(entry or os.curdir), "heapmem")
        if there == here or not os.path.exists(os.path.join(there, "heapmem0" + SUFFIX)):
            continue
        try:
            with io.open(os.path.join(there, "_version.py"), encoding="utf-8") as f:
                text = f.read()
            same = f'"{__version__}"' in text or f"'{__version__}'" in text
        except OSError:
            same = False
        if same and os.path.exists(os.path.join(there, "heapmem.h")):
            return there
    return here


_LIBRARY_DIR = _library_dir()


def loadable_path() -> str:
    """Path of the compiled library without its suffix, as SQLite's
    load_extension and the sqlite3 shell's `.load` expect it."""
    return os.path.join(_LIBRARY_DIR, "heapmem0")


#: The C header, shipped beside the library (setup.py copies csrc/heapmem.h).
HEADER_PATH = os.path.join(_LIBRARY_DIR, "heapmem.h")


@dataclass(frozen=True)
class ConfigField:
    """One field of the C config struct, as HM_CONFIG_FIELDS lists it."""

    name: str
    default: float
    low: float
    high: float
    rule: str  # HM_RULE_RANGE, HM_RULE_POSITIVE, HM_RULE_PRIOR or HM_RULE_SWITCH
    message: str


_FIELD_RE = re.compile(r'X\((\w+),\s*([^,]+),\s*([^,]+),\s*([^,]+),\s*(HM_RULE_\w+),\s*"([^"]*)"\)')


def _header_text(path: str) -> str:
    try:
        with io.open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ImportError(
            f"heapmem: the C header {path} is missing ({e}). If this is heapmem's source tree, "
            "it has no build: run from another folder to use the installed heapmem, or build "
            "it here with `pip install -e .`; otherwise reinstall heapmem (`pip install .` "
            "copies the header beside the library)") from None


def read_header(path: str = HEADER_PATH) -> tuple[str, tuple[ConfigField, ...]]:
    """The cffi declarations and the config fields, from the C header: the
    text between its cdef markers, with HM_API dropped and the config struct's
    field list written out."""
    text = _header_text(path)
    fields = tuple(ConfigField(m[1], float(m[2]), float(m[3]), float(m[4]), m[5], m[6])
                   for m in _FIELD_RE.finditer(text))
    try:
        cdef = text[text.index("/* cdef-begin */"):text.index("/* cdef-end */")]
    except ValueError:
        raise ImportError(f"heapmem: {path} has no cdef markers") from None
    cdef = re.sub(r"\bHM_API\s+", "", cdef)
    cdef = cdef.replace("HM_CONFIG_FIELDS(HM_CONFIG_MEMBER)",
                        " ".join(f"double {f.name};" for f in fields))
    return cdef, fields


def _xtable(text: str, name: str) -> list[list[str]]:
    """The rows of the header's X-macro table `name`: each X(...)'s arguments,
    as text (a string argument without its quotes)."""
    m = re.search(r"^#define " + name + r"\(X\)((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        raise ImportError(f"heapmem: the C header has no table {name}")
    body = m.group(1).replace("\\\n", " ")
    rows = []
    for args in re.findall(r'X\(((?:[^()"]|"[^"]*")*)\)', body):
        rows.append([a.strip().strip('"') for a in re.findall(r'"[^"]*"|[^,]+', args)])
    return rows


def _xstring(text: str, name: str) -> str:
    m = re.search(r"^#define " + name + r' "([^"]*)"', text, re.M)
    if not m:
        raise ImportError(f"heapmem: the C header has no {name}")
    return m.group(1)


def _number(v: str) -> int | float:
    return float(v) if any(c in v for c in ".eE") else int(v)


@dataclass(frozen=True)
class Vocabulary:
    """The words and bounds every door shares, as csrc/heapmem.h's tables
    state them (HM_LIMITS, HM_KINDS, HM_QTYPES and the feature grammar)."""

    limits: dict[str, int | float]       # name -> value (MAX_K, MAX_TEXT_BYTES, ...)
    kinds: dict[str, float]              # kind -> its default importance
    default_kind: str                    # a memory's kind when none is given
    qtypes: tuple[str, ...]              # hm_qtype's names, "other" first
    source_roles: tuple[str, ...]        # src:<role>
    len_buckets: tuple[str, ...]         # len:<bucket>
    flag_slots: tuple[str, ...]          # <slot>:0 / <slot>:1
    age_buckets: tuple[str, ...]         # age:<bucket>
    other_value: str                     # kind:/src: of what heapmem does not know
    no_source: str                       # src: of a memory without a source
    relate_slot: str                     # hm_relate's slot (srcq)
    ctx_feature: str                     # the feature a recall adds (ctx:1)
    base_feature: str                    # every memory's (base)


def read_vocabulary(path: str = HEADER_PATH) -> Vocabulary:
    text = _header_text(path)
    return Vocabulary(
        limits={r[0]: _number(r[1]) for r in _xtable(text, "HM_LIMITS")},
        kinds={r[0]: float(r[1]) for r in _xtable(text, "HM_KINDS")},
        default_kind=_xstring(text, "HM_DEFAULT_KIND"),
        qtypes=tuple(r[0] for r in _xtable(text, "HM_QTYPES")),
        source_roles=tuple(r[0] for r in _xtable(text, "HM_SOURCE_ROLES")),
        len_buckets=tuple(r[0] for r in _xtable(text, "HM_LEN_BUCKETS")),
        flag_slots=tuple(r[0] for r in _xtable(text, "HM_FLAG_SLOTS")),
        age_buckets=tuple(r[0] for r in _xtable(text, "HM_AGE_BUCKETS")),
        other_value=_xstring(text, "HM_OTHER_VALUE"),
        no_source=_xstring(text, "HM_NO_SOURCE"),
        relate_slot=_xstring(text, "HM_RELATE_SLOT"),
        ctx_feature=_xstring(text, "HM_CTX_FEATURE"),
        base_feature=_xstring(text, "HM_BASE_FEATURE"))


CDEF, CONFIG_FIELDS = read_header()
#: The vocabulary every door shares (heapmem.h): limits, kinds, question types, features.
VOCABULARY = read_vocabulary()
LIMITS = VOCABULARY.limits

def load(conn: Any) -> None:
    """Load the heapmem SQL functions into an apsw or sqlite3 connection."""
    import apsw

    path = loadable_path()
    if isinstance(conn, apsw.Connection):
        conn.enable_load_extension(True)
        try:
            conn.load_extension(path)
        finally:
            conn.enable_load_extension(False)
        return
    enable = getattr(conn, "enable_load_extension", None)
    if enable is None:
        raise TypeError("load() needs an apsw.Connection or a sqlite3.Connection built with "
                        "extension loading")
    enable(True)
    try:
        conn.load_extension(path)
    finally:
        enable(False)


ffi = FFI()
ffi.cdef(CDEF)
try:
    lib = ffi.dlopen(loadable_path() + SUFFIX)
except OSError as e:  # pragma: no cover - only on a broken install
    raise ImportError(
        f"heapmem: the compiled library {loadable_path() + SUFFIX} is missing or broken ({e}); "
        "reinstall with `pip install .` (needs a C compiler and the SQLite headers)"
    ) from None

_ERRLEN = lib.HM_ERRLEN
_ACTIVE_LEN = lib.HM_ACTIVE_LEN
#: Most active features of one memory (shape features and their crossed twins).
MAX_FEATURES = 2 * lib.HM_MAX_FEATURES


def _cstr(s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    if b"\x00" in b:
        b = b.replace(b"\x00", b" ")
    return b


def qtype(question: str) -> str:
    """The question type: when, who, where, what, how, how_many, why, yes_no, other."""
    return ffi.string(lib.hm_qtype(_cstr(question))).decode()


_local = threading.local()


def features(text: str, kind: str, source: str | None) -> str:
    """The memory's shape features, space-separated."""
    out = ffi.new("char[]", lib.HM_FEATURES_LEN)
    rc = lib.hm_features(_cstr(text), _cstr(kind),
                         _cstr(source) if source is not None else ffi.NULL,
                         out, lib.HM_FEATURES_LEN)
    if rc != 0:
        raise HeapmemError("heapmem: too many features")
    return ffi.string(out).decode()


def active(features: str, qt: str, age_days: float = math.nan) -> list[str]:
    """The features a memory of this age shows to a question of type qt."""
    out = ffi.new("char[]", _ACTIVE_LEN)
    err = ffi.new("char[]", _ERRLEN)
    if lib.hm_active(_cstr(features), _cstr(qt), age_days, out, _ACTIVE_LEN, err, _ERRLEN) != 0:
        raise ValueError(ffi.string(err).decode() or "too many features")
    return ffi.string(out).decode().split()


#: The dimension of the embedder the library carries (potion-base-8M).
EMBED_DIM = lib.HM_EMBED_DIM


def embed(texts: Sequence[str]) -> np.ndarray:
    """The unit vectors of texts from the embedder the library carries
    (csrc/embed.c): float32, EMBED_DIM columns; a text with no token the
    model knows gets zeros."""
    out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
    err = ffi.new("char[]", _ERRLEN)
    row = ffi.cast("float *", ffi.from_buffer(out))
    for i, t in enumerate(texts):
        b = _cstr(t)
        if lib.hm_embed(b, len(b), row + i * EMBED_DIM, EMBED_DIM, err, _ERRLEN) < 0:
            raise HeapmemError(ffi.string(err).decode())
    return out


def embedder_info() -> str:
    """What the library's embedder is, one line."""
    return ffi.string(lib.hm_embedder_info()).decode()


def fnv64(feature: str) -> int:
    """The hash that keys a feature in a link-set blob."""
    return int(lib.hm_hash(_cstr(feature)))


def relate(question: str, source: str | None) -> str:
    """How a memory relates to a question, as features ("srcq:1")."""
    out = ffi.new("char[]", lib.HM_RELATE_LEN)
    lib.hm_relate(_cstr(question), _cstr(source) if source is not None else ffi.NULL, out,
                  lib.HM_RELATE_LEN)
    return ffi.string(out).decode()


@functools.lru_cache(maxsize=4096)
def ns_tag(namespace: str) -> str:
    """The FTS5 token that tags a namespace's memories."""
    out = ffi.new("char[]", lib.HM_NS_TAG_LEN)
    if lib.hm_ns_tag(_cstr(namespace), out, lib.HM_NS_TAG_LEN) < 0:
        raise ValueError(f"a namespace is at most {lib.HM_MAX_NS_BYTES} bytes of UTF-8")
    return ffi.string(out).decode()


def match(question: str, namespace: str | None = None) -> str | None:
    """The safe FTS5 MATCH expression for a question, None without terms."""
    size = lib.HM_MATCH_LEN
    out = ffi.new("char[]", size)
    n = lib.hm_match(_cstr(question), _cstr(namespace) if namespace is not None else ffi.NULL,
                     out, size)
    if n < 0:
        raise HeapmemError("heapmem: query too long")
    return ffi.string(out).decode() if n > 0 else None


def time_window(question: str, now: float) -> tuple[float, float, str] | None:
    """The window of time a question names, read as of now (unix seconds):
    (from, until, the words that name it), from inclusive and until exclusive,
    whole UTC days; None when it names none (csrc/when.c)."""
    q = _cstr(question)
    lo, hi = ffi.new("double *"), ffi.new("double *")
    start, length = ffi.new("int *"), ffi.new("int *")
    if not lib.hm_time_window(q, float(now), lo, hi, start, length):
        return None
    return lo[0], hi[0], q[start[0]:start[0] + length[0]].decode("utf-8", "replace")


def link_view(own_a: float, own_b: float, pool_a: float, pool_b: float,
              pseudocount: float) -> tuple[float, float]:
    a = ffi.new("double *")
    b = ffi.new("double *")
    lib.hm_link_view(own_a, own_b, pool_a, pool_b, pseudocount, a, b)
    return a[0], b[0]


def recency(age_days: float, half_life_days: float = 30.0, floor: float = 0.5) -> float:
    return lib.hm_recency(age_days, half_life_days, floor)


def noisy_or(strengths: Sequence[float]) -> float:
    s = np.ascontiguousarray(strengths, dtype=np.float64)
    return lib.hm_noisy_or(ffi.cast("double *", ffi.from_buffer(s)), len(s))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two float32 vectors (NaN if either is all zeros)."""
    with np.errstate(all="ignore"):  # out-of-range values become inf, as float32 says
        a = np.ascontiguousarray(a, dtype=np.float32)
        b = np.ascontiguousarray(b, dtype=np.float32)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError("heapmem: vectors must be 1-D and of one length, "
                         f"got {a.shape}, {b.shape}")
    return lib.hm_cosine(ffi.cast("float *", ffi.from_buffer(a)),
                         ffi.cast("float *", ffi.from_buffer(b)), len(a))


def config(text: str) -> "FFI.CData":
    """Parse a config string ('w_recency=0 half_life_days=14') in C."""
    c = ffi.new("hm_config *")
    err = ffi.new("char[]", _ERRLEN)
    if lib.hm_config_parse(_cstr(text), c, err, _ERRLEN) != 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    return c


#: score_batch's columns, in hm_score_batch's order (csrc/heapmem.h): index
#: its output by name (out[:, SCORE_COLUMN["score"]]), never by number
SCORE_COLUMN_NAMES = ("relevance", "recency", "importance", "usefulness", "rules", "score",
                      "rest", "lift")
SCORE_COLUMN = {name: i for i, name in enumerate(SCORE_COLUMN_NAMES)}


def score_batch(relevance: np.ndarray, age_days: np.ndarray, importance: np.ndarray,
                superseded: np.ndarray, features: Sequence[str], qt: str, links: bytes,
                cfg: "FFI.CData") -> np.ndarray:
    """Score n candidates; returns an (n, SCORE_COLUMNS) array: relevance,
    recency, importance, usefulness, rules, score, and rest (the score
    without its usefulness factor)."""
    n = len(features)
    arrays = []
    for name, arr, dtype in (("relevance", relevance, np.float64),
                             ("age_days", age_days, np.float64),
                             ("importance", importance, np.float64),
                             ("superseded", superseded, np.intc)):
        if isinstance(arr, np.ndarray) and arr.dtype == dtype and arr.flags.c_contiguous:
            a = arr  # recall()'s own arrays: nothing to convert
        else:
            with np.errstate(all="ignore"):  # C checks the values: NaN relevance is an error
                a = np.ascontiguousarray(arr, dtype=dtype)
        if a.shape != (n,):
            raise ValueError(f"heapmem: {name} must have shape ({n},), got {a.shape}")
        arrays.append(a)
    # every features string in one NUL-separated buffer, and pointers into it
    # (computed by numpy from the offsets: no Python loop over the candidates)
    encoded = [_cstr(f) for f in features]
    joined = b"\0".join(encoded) + b"\0"
    buf = ffi.from_buffer(joined)
    if n:
        starts = np.zeros(n, dtype=np.uintp)
        np.cumsum([len(e) + 1 for e in encoded[:-1]], out=starts[1:])
        starts += int(ffi.cast("uintptr_t", buf))
        fptr = ffi.cast("const char **", ffi.from_buffer(starts))
    else:
        fptr = ffi.NULL
    out = np.zeros((n, lib.HM_SCORE_COLUMNS), dtype=np.float64)
    bad = ffi.new("int *")
    err = ffi.new("char[]", _ERRLEN)
    rc = lib.hm_score_batch(
        n, ffi.cast("double *", ffi.from_buffer(arrays[0])),
        ffi.cast("double *", ffi.from_buffer(arrays[1])),
        ffi.cast("double *", ffi.from_buffer(arrays[2])),
        ffi.cast("int *", ffi.from_buffer(arrays[3])), fptr, _cstr(qt), links, len(links), cfg,
        ffi.cast("double *", ffi.from_buffer(out)), bad, err, _ERRLEN)
    if rc != 0:
        raise ValueError(f"heapmem: candidate {bad[0]}: " + ffi.string(err).decode())
    return out


def explain(relevance: float, age_days: float, importance: float, superseded: bool,
            features: str, qt: str, links: bytes, cfg: "FFI.CData",
            bm25_part: float = math.nan, cos_part: float = math.nan, context: float = 1.0,
            context_n: float = 0.0, explore: float = 1.0, thread: float = 1.0,
            thread_from: str | None = None, thread_offset: int = 0, time: float = 1.0,
            time_window: str | None = None) -> str:
    """The line that explains a score (hm_explain): its factors, contextual
    utility's and exploration's among them, the thread's and the time's
    (with the neighbour and the window they name), and the score they make."""
    bufs = getattr(_local, "explain_bufs", None)
    if bufs is None:  # one input struct and two output buffers per thread, reused
        bufs = _local.explain_bufs = (ffi.new("hm_input *"),
                                      ffi.new("char[]", lib.HM_EXPLAIN_LEN),
                                      ffi.new("char[]", _ERRLEN))
    inp, out, err = bufs
    fb = ffi.from_buffer(_cstr(features) + b"\0")  # alive until the call returns
    inp.relevance = relevance
    inp.age_days = age_days
    inp.importance = importance
    inp.superseded = int(bool(superseded))
    inp.features = ffi.cast("const char *", fb)
    inp.bm25_part = bm25_part
    inp.cos_part = cos_part
    inp.context = context
    inp.context_n = context_n
    inp.explore = explore
    inp.thread = thread
    inp.time = time
    inp.thread_offset = thread_offset
    tf = ffi.from_buffer(_cstr(thread_from) + b"\0") if thread_from is not None else None
    tw = ffi.from_buffer(_cstr(time_window) + b"\0") if time_window is not None else None
    inp.thread_from = ffi.cast("const char *", tf) if tf is not None else ffi.NULL
    inp.time_window = ffi.cast("const char *", tw) if tw is not None else ffi.NULL
    if lib.hm_explain(inp, _cstr(qt), links, len(links), cfg, out, lib.HM_EXPLAIN_LEN, err,
                      _ERRLEN) != 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    return ffi.string(out).decode()


def credit(features: str, qt: str, age_days: float, used: bool, links: bytes,
           cfg: "FFI.CData") -> list[tuple[str, float, float]]:
    """What judging one memory teaches: (feature, d_alpha, d_beta) rows."""
    names = ffi.new("char[]", _ACTIVE_LEN)
    da = np.zeros(MAX_FEATURES, dtype=np.float64)
    db = np.zeros(MAX_FEATURES, dtype=np.float64)
    err = ffi.new("char[]", _ERRLEN)
    k = lib.hm_credit(_cstr(features), _cstr(qt), age_days, int(bool(used)), links, len(links),
                      cfg, names, _ACTIVE_LEN, ffi.cast("double *", ffi.from_buffer(da)),
                      ffi.cast("double *", ffi.from_buffer(db)), MAX_FEATURES, err, _ERRLEN)
    if k < 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    fs = ffi.string(names).decode().split()
    return [(fs[i], float(da[i]), float(db[i])) for i in range(k)]


def beta_samples(a: float, b: float, seed: int, n: int) -> np.ndarray:
    """n draws of Beta(a, b) from the seeded stream exploration draws from
    (splitmix64 and Marsaglia-Tsang gammas, in C): the same seed, the same
    draws.  a and b must be positive finite numbers."""
    if not 0 <= seed < 2**64:
        raise ValueError("heapmem: seed must be an integer from 0 to 2**64 - 1")
    out = np.zeros(max(n, 0), dtype=np.float64)
    if lib.hm_beta_samples(a, b, seed, n, ffi.cast("double *", ffi.from_buffer(out))) != 0:
        raise ValueError(f"heapmem: Beta({a!r}, {b!r}) needs positive finite parameters and "
                         f"n >= 0, got n={n}")
    return out


def explore(features: Sequence[str], age_days: Sequence[float], qt: str, links: bytes,
            cfg: "FFI.CData", seed: int) -> np.ndarray:
    """The factors exploration (cfg.explore > 0) puts on these candidates'
    scores in a tracked recall seeded with seed (all 1.0 when it is off)."""
    if not 0 <= seed < 2**64:
        raise ValueError("heapmem: seed must be an integer from 0 to 2**64 - 1")
    n = len(features)
    if len(age_days) != n:
        raise ValueError(f"heapmem: {n} features but {len(age_days)} ages")
    keep = [ffi.new("char[]", _cstr(f)) for f in features]  # alive until the call returns
    fptr = ffi.new("const char *[]", keep) if n else ffi.NULL
    ages = np.ascontiguousarray(age_days, dtype=np.float64)
    out = np.ones(n, dtype=np.float64)
    work = np.zeros(2 * n, dtype=np.float64)
    bad = ffi.new("int *")
    err = ffi.new("char[]", _ERRLEN)
    if lib.hm_explore(n, fptr, ffi.cast("double *", ffi.from_buffer(ages)), _cstr(qt), links,
                      len(links), cfg, seed, ffi.cast("double *", ffi.from_buffer(out)),
                      ffi.cast("double *", ffi.from_buffer(work)), bad, err, _ERRLEN) != 0:
        raise ValueError(f"heapmem: candidate {bad[0]}: " + ffi.string(err).decode())
    return out
