"""cffi (ABI mode) bindings to the compiled heapmem library.

The library SQLite loads as an extension is the one dlopened here, so Python
and raw SQL rank with the very same C code.  One thin, typed function per C
entry point; numpy arrays are checked at the boundary.
"""
from __future__ import annotations

import functools
import math
import os
import sys
import threading
from typing import Sequence

import numpy as np
from cffi import FFI

from .errors import HeapmemError

_CDEF = """
typedef struct {
  double w_relevance, w_recency, w_importance, w_usefulness;
  double half_life_days, recency_floor, superseded_factor;
  double prior_alpha, prior_beta;
  double model, gate_z, combine;
} hm_config;
typedef struct {
  double relevance;
  double age_days;
  double importance;
  int superseded;
  const char *features;
  double bm25_part;
  double cos_part;
} hm_input;

const char *hm_qtype(const char *q);
int hm_is_stop_word(const char *w);
int hm_features(const char *text, const char *kind, const char *source, char *out, int outlen);
int hm_active(const char *features, const char *qtype, double age_days, char *out, int outlen,
              char *err, int errlen);
void hm_ns_tag(const char *ns, char *out);
uint64_t hm_hash(const char *s);
int hm_relate(const char *question, const char *source, char *out, int outlen);
int hm_match(const char *q, const char *ns, char *out, int outlen);
void hm_link_view(double own_a, double own_b, double pool_a, double pool_b, double pseudocount,
                  double *a, double *b);
void hm_config_default(hm_config *c);
int hm_config_parse(const char *text, hm_config *c, char *err, int errlen);
double hm_recency(double age_days, double half_life_days, double floor);
double hm_noisy_or(const double *s, int n);
double hm_cosine(const float *a, const float *b, int n);
int hm_score_batch(int n, const double *relevance, const double *age_days,
                   const double *importance, const int *superseded,
                   const char *const *features, const char *qtype,
                   const unsigned char *links, int64_t linkslen, const hm_config *c,
                   double *out, int *bad, char *err, int errlen);
int hm_explain(const hm_input *in, const char *qtype, const unsigned char *links,
               int64_t linkslen, const hm_config *c, char *out, int outlen, char *err,
               int errlen);
int hm_credit(const char *features, const char *qtype, double age_days, int used,
              const unsigned char *links, int64_t linkslen, const hm_config *c,
              char *names, int nameslen, double *d_alpha, double *d_beta, int max,
              char *err, int errlen);
"""

if sys.platform == "darwin":
    SUFFIX = ".dylib"
elif sys.platform == "win32":
    SUFFIX = ".dll"
else:
    SUFFIX = ".so"


def loadable_path() -> str:
    """Path of the compiled library without its suffix, as SQLite's
    load_extension and the sqlite3 shell's `.load` expect it."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "heapmem0")


ffi = FFI()
ffi.cdef(_CDEF)
try:
    lib = ffi.dlopen(loadable_path() + SUFFIX)
except OSError as e:  # pragma: no cover - only on a broken install
    raise ImportError(
        f"heapmem: the compiled library {loadable_path() + SUFFIX} is missing or broken ({e}); "
        "reinstall with `pip install .` (needs a C compiler and the SQLite headers)"
    ) from None

_ERRLEN = 256
_ACTIVE_LEN = 2 * 64 * (2 * 64 + 16)
MAX_FEATURES = 128


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
    out = ffi.new("char[]", 1024)
    rc = lib.hm_features(_cstr(text), _cstr(kind), _cstr(source) if source is not None else ffi.NULL,
                         out, 1024)
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


def fnv64(feature: str) -> int:
    """The hash that keys a feature in a link-set blob."""
    return int(lib.hm_hash(_cstr(feature)))


def relate(question: str, source: str | None) -> str:
    """How a memory relates to a question, as features ("srcq:1")."""
    out = ffi.new("char[]", 16)
    lib.hm_relate(_cstr(question), _cstr(source) if source is not None else ffi.NULL, out, 16)
    return ffi.string(out).decode()


@functools.lru_cache(maxsize=4096)
def ns_tag(namespace: str) -> str:
    """The FTS5 token that tags a namespace's memories."""
    out = ffi.new("char[]", 19)
    lib.hm_ns_tag(_cstr(namespace), out)
    return ffi.string(out).decode()


def match(question: str, namespace: str | None = None) -> str | None:
    """The safe FTS5 MATCH expression for a question, None without terms."""
    size = 32 * 72 + 64
    out = ffi.new("char[]", size)
    n = lib.hm_match(_cstr(question), _cstr(namespace) if namespace is not None else ffi.NULL,
                     out, size)
    if n < 0:
        raise HeapmemError("heapmem: query too long")
    return ffi.string(out).decode() if n > 0 else None


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
        raise ValueError(f"heapmem: vectors must be 1-D and of one length, got {a.shape}, {b.shape}")
    return lib.hm_cosine(ffi.cast("float *", ffi.from_buffer(a)),
                         ffi.cast("float *", ffi.from_buffer(b)), len(a))


def config(text: str) -> "ffi.CData":
    """Parse a config string ('w_recency=0 half_life_days=14') in C."""
    c = ffi.new("hm_config *")
    err = ffi.new("char[]", _ERRLEN)
    if lib.hm_config_parse(_cstr(text), c, err, _ERRLEN) != 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    return c


def score_batch(relevance: np.ndarray, age_days: np.ndarray, importance: np.ndarray,
                superseded: np.ndarray, features: Sequence[str], qt: str, links: bytes,
                cfg: "ffi.CData") -> np.ndarray:
    """Score n candidates; returns an (n, 6) array: relevance, recency,
    importance, usefulness, rules, score."""
    n = len(features)
    arrays = []
    for name, arr, dtype in (("relevance", relevance, np.float64), ("age_days", age_days, np.float64),
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
    out = np.zeros((n, 6), dtype=np.float64)
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
            features: str, qt: str, links: bytes, cfg: "ffi.CData",
            bm25_part: float = math.nan, cos_part: float = math.nan) -> str:
    bufs = getattr(_local, "explain_bufs", None)
    if bufs is None:  # one input struct and two output buffers per thread, reused
        bufs = _local.explain_bufs = (ffi.new("hm_input *"), ffi.new("char[]", 1024),
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
    if lib.hm_explain(inp, _cstr(qt), links, len(links), cfg, out, 1024, err, _ERRLEN) != 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    return ffi.string(out).decode()


def credit(features: str, qt: str, age_days: float, used: bool, links: bytes,
           cfg: "ffi.CData") -> list[tuple[str, float, float]]:
    """What judging one memory teaches: (feature, d_alpha, d_beta) rows."""
    names = ffi.new("char[]", _ACTIVE_LEN)
    da = np.zeros(MAX_FEATURES, dtype=np.float64)
    db = np.zeros(MAX_FEATURES, dtype=np.float64)
    err = ffi.new("char[]", _ERRLEN)
    k = lib.hm_credit(_cstr(features), _cstr(qt), age_days, int(bool(used)), links, len(links), cfg, names,
                      _ACTIVE_LEN, ffi.cast("double *", ffi.from_buffer(da)),
                      ffi.cast("double *", ffi.from_buffer(db)), MAX_FEATURES, err, _ERRLEN)
    if k < 0:
        raise ValueError("heapmem: " + ffi.string(err).decode())
    fs = ffi.string(names).decode().split()
    return [(fs[i], float(da[i]), float(db[i])) for i in range(k)]
