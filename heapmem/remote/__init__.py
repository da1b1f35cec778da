"""heapmem on a libSQL server (sqld): the Hrana client (hrana), the
connection Memory runs on when heapmem.open() is given a URL (connection),
and running a server with heapmem's library (sqld).  Nothing in the core
imports it but heapmem.db.connect, which chooses a store's connection once,
at open.

`from heapmem.remote import ServerError` and the other names of
connection still work, as from the module of that name before.
"""
from .connection import *  # noqa: F401,F403
