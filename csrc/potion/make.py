"""Make the two generated inputs of heapmem's static embedder (csrc/embed.c).

    python csrc/potion/make.py [MODEL_DIR]

MODEL_DIR is MinishLab's potion-base-8M as published (model.safetensors and
tokenizer.json; default ../shared/data/potion-base-8M beside this repository).
It writes, next to this file:

  potion-base-8M.hmv  the model in heapmem's own compact form: the WordPiece
                      vocabulary with a ready-made hash table over it, and the
                      29,528 x 256 token table at int8 with one float32 scale
                      per row (7.7 MB instead of 30 MB).  setup.py assembles it
                      into the shared library (.incbin), so the library alone
                      embeds text: any SQLite client that loads it, and a server.
  ../unicode.h        the Unicode tables the tokenizer's normalisation needs:
                      for every code point BERT's normaliser changes, what it
                      becomes (NFD, nonspacing marks dropped, lower case; control
                      characters dropped), the punctuation ranges, and the white
                      space; from this Python's unicodedata (its version is
                      written in the header).

Both outputs are committed; this script is how they were made, and
tests/test_embed.py checks that running it again gives the same bytes.
The model's licence (MIT, MinishLab) travels with it: ATTRIBUTION.txt beside
the .hmv, and beside the built library in the package.

Format of the .hmv (little-endian):
  char[8]  "HMSTATIC"
  u32      format version (1)
  u32      tokens, u32 dimension, u32 id of [UNK], u32 vocabulary bytes,
  u32      hash slots (a power of two), u32 the longest token's bytes
  char[32] model name, NUL-padded
  the vocabulary: each token's UTF-8 and a NUL, in id order, padded to 4 bytes
  u32[tokens]  where each token starts in the vocabulary
  u32[slots]   the hash table: token id + 1 (0: empty), FNV-1a 32-bit of the
               token's bytes, linear probing
  f32[tokens]  each row's scale
  i8[tokens x dimension]  the rows: value = scale x byte
"""
from __future__ import annotations

import json
import os
import struct
import sys
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "potion-base-8M"
SLOTS = 1 << 16


def fnv1a(b: bytes) -> int:
    h = 0x811C9DC5
    for x in b:
        h = ((h ^ x) * 0x01000193) & 0xFFFFFFFF
    return h


def read_table(model_dir: str) -> np.ndarray:
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        t = header["embeddings"]
        if t["dtype"] != "F32" or len(t["shape"]) != 2:
            raise SystemExit(f"unexpected tensor {t}")
        start, end = t["data_offsets"]
        f.seek(8 + n + start)
        data = f.read(end - start)
    return np.frombuffer(data, dtype="<f4").reshape(t["shape"])


def read_vocab(model_dir: str) -> tuple[list[str], int]:
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    model = tok["model"]
    if model["type"] != "WordPiece" or model["continuing_subword_prefix"] != "##":
        raise SystemExit("not a WordPiece tokenizer with ## continuations")
    vocab = model["vocab"]
    ids = sorted(vocab.values())
    if ids != list(range(len(ids))):
        raise SystemExit("the vocabulary's ids are not 0..n-1")
    words = [""] * len(ids)
    for w, i in vocab.items():
        words[i] = w
    return words, vocab[model["unk_token"]]


def model_bytes(model_dir: str) -> bytes:
    table = read_table(model_dir)
    words, unk = read_vocab(model_dir)
    if table.shape[0] != len(words):
        raise SystemExit(f"{table.shape[0]} rows for {len(words)} tokens")
    ntok, dim = table.shape
    scale = np.abs(table).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    enc = [w.encode("utf-8") for w in words]
    offs = np.cumsum([0] + [len(b) + 1 for b in enc[:-1]]).astype("<u4")
    vocab = b"".join(b + b"\0" for b in enc)
    vocab += b"\0" * (-len(vocab) % 4)
    slots = np.zeros(SLOTS, dtype="<u4")
    for i, w in enumerate(words):
        h = fnv1a(w.encode("utf-8")) & (SLOTS - 1)
        while slots[h]:
            h = (h + 1) & (SLOTS - 1)
        slots[h] = i + 1
    head = b"HMSTATIC" + struct.pack("<7I", 1, ntok, dim, unk, len(vocab), SLOTS,
                                     max(len(b) for b in enc))
    head += NAME.encode().ljust(32, b"\0")
    return (head + vocab + offs.tobytes() + slots.tobytes() + scale.astype("<f4").tobytes() +
            q.tobytes())


# -- Unicode -------------------------------------------------------------------------

CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# Rust's char::is_whitespace (the White_Space property), which BERT's
# normaliser and pre-tokenizer use
WHITE = (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
         0x2028, 0x2029, 0x202F, 0x205F, 0x3000)


def _is_control(c: int) -> bool:
    if c in (0x09, 0x0A, 0x0D):
        return False
    return unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Co", "Cn")


def normalised(c: int) -> str:
    """What BERT's normaliser makes of one code point, on its own."""
    if c == 0 or c == 0xFFFD or _is_control(c):
        return ""
    if c in WHITE:
        return " "
    d = unicodedata.normalize("NFD", chr(c))
    d = "".join(x for x in d if unicodedata.category(x) != "Mn")
    return "".join(x.lower() for x in d)


def unicode_header() -> str:
    maps, drops = [], []
    for c in range(0x80, 0x110000):
        if 0xD800 <= c < 0xE000 or 0xAC00 <= c <= 0xD7A3 or any(
                a <= c <= b for a, b in CJK if a not in (0xF900, 0x2F800)):
            continue  # surrogates never decode; Hangul is decomposed in C; unified CJK
            # ideographs stay as they are (the compatibility ones decompose)
        n = normalised(c)
        if n == "":
            if drops and drops[-1][1] == c - 1:
                drops[-1][1] = c
            else:
                drops.append([c, c])
        elif n != chr(c):
            maps.append((c, n.encode("utf-8")))
    pool = bytearray()
    rows = []
    for c, b in maps:
        if len(b) > 255:
            raise SystemExit(f"U+{c:04X} maps to {len(b)} bytes")
        rows.append(f"{{0x{c:X}, {len(pool)}, {len(b)}}}")
        pool += b
    punct = []
    start = None
    for c in range(0x80, 0x110001):
        p = c < 0x110000 and unicodedata.category(chr(c)).startswith("P")
        if p and start is None:
            start = c
        elif not p and start is not None:
            punct.append((start, c - 1))
            start = None
    out = [
        "/* unicode.h: generated by csrc/potion/make.py from Python's unicodedata "
        f"{unicodedata.unidata_version}; do not edit.",
        " * hu_map: every code point from U+0080 that BERT's normaliser changes into something",
        " * (NFD, nonspacing marks dropped, lower case; white space: ' '), sorted, with its result",
        " * in hu_pool; hu_drop: the ranges it removes (control, format, unassigned, private use,",
        " * nonspacing marks); CJK ideographs and Hangul syllables are done in embed.c.",
        " * hu_punct: the ranges of general category P* from U+0080. */",
        f'#define HU_UNICODE_VERSION "{unicodedata.unidata_version}"',
        "typedef struct { uint32_t cp; uint32_t off; uint8_t len; } hu_entry;",
        f"static const hu_entry hu_map[{len(rows)}] = {{",
    ]
    for i in range(0, len(rows), 6):
        out.append("  " + ", ".join(rows[i:i + 6]) + ",")
    out.append("};")
    out.append(f"static const unsigned char hu_pool[{max(len(pool), 1)}] = {{")
    for i in range(0, len(pool), 20):
        out.append("  " + ",".join(str(x) for x in pool[i:i + 20]) + ",")
    out.append("};")
    out.append(f"static const uint32_t hu_drop[{len(drops)}][2] = {{")
    for i in range(0, len(drops), 6):
        out.append("  " + ", ".join(f"{{0x{a:X}, 0x{b:X}}}" for a, b in drops[i:i + 6]) + ",")
    out.append("};")
    out.append(f"static const uint32_t hu_punct[{len(punct)}][2] = {{")
    for i in range(0, len(punct), 6):
        out.append("  " + ", ".join(f"{{0x{a:X}, 0x{b:X}}}" for a, b in punct[i:i + 6]) + ",")
    out.append("};")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    model_dir = argv[1] if len(argv) > 1 else os.path.join(
        HERE, "..", "..", "..", "shared", "data", NAME)
    with open(os.path.join(HERE, NAME + ".hmv"), "wb") as f:
        f.write(model_bytes(model_dir))
    with open(os.path.join(HERE, "..", "unicode.h"), "w", encoding="ascii") as f:
        f.write(unicode_header())


if __name__ == "__main__":
    main(sys.argv)
