"""What feedback teaches, read from Python: how events add up to links
(links), links-only priors merged from other stores (priors), and tuning
from the store's own log (tune).  The learning itself (the fold of
feedback into Beta counts, the gate, the pooled layer) is in the C core,
csrc/feedback.c and csrc/score.c; these modules read its tables through
heapmem.db.

`from heapmem import learning` still gives the functions of links, as the
module of that name did before the package existed.
"""
from .links import *  # noqa: F401,F403
