"""`python -m heapmem`: the `heapmem` command (heapmem.adapters.cli)."""
import sys

from heapmem.adapters.cli import main

sys.exit(main())
