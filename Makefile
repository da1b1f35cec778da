# heapmem developer targets.
#
#   make test       the whole test suite (CI)
#   make lint       ruff and mypy with pyproject.toml's settings (the tests run
#                   them too: tests/test_tooling.py)
#   make soak       the long soak variants (HEAPMEM_SOAK=1): concurrency,
#                   crash, a fault at every I/O call in every mode, and 20x
#                   the property-test examples
#   make sanitize   the C library built with AddressSanitizer + UBSan
#                   (setup.py's HEAPMEM_SANITIZE=1) and the tests that drive
#                   it run against that build
#
# `make sanitize` builds into build/sanitize/ (a copy of the package with the
# instrumented library), never over heapmem/heapmem0.so, so the normal build
# keeps working.  Python itself is not instrumented, so libasan must be
# preloaded for the dlopen'ed library; leak detection is off (the Python
# interpreter does not free everything at exit).

# The Python to run: PYTHON from the environment or the command line
# (`make test PYTHON=python3.12`), else the active virtualenv's ($VIRTUAL_ENV),
# else the repo's .venv (as .ci/run makes it), else python3 on the PATH.  A
# path is made absolute, as `make sanitize` runs it from another folder.
PYTHON ?= $(firstword $(if $(VIRTUAL_ENV),$(wildcard $(VIRTUAL_ENV)/bin/python)) \
	$(abspath $(wildcard .venv/bin/python)) python3)
override PYTHON := $(if $(findstring /,$(PYTHON)),$(abspath $(PYTHON)),$(PYTHON))
CC ?= gcc
SAN_DIR := build/sanitize
SAN_TESTS ?= tests/test_cfuzz.py tests/test_sql_loop.py tests/test_embed.py tests/test_context.py tests/test_hostile.py tests/test_isolation.py tests/test_times.py \
	tests/test_bm25.py tests/test_bm25_pruned.py tests/test_feedback.py tests/test_recall.py tests/test_recall_across.py tests/test_filters.py \
	tests/test_explore.py tests/test_authority.py tests/test_tune.py tests/test_threads.py \
	tests/test_time_in_questions.py tests/test_vindex.py \
	tests/test_two_sqlite_libraries.py tests/test_entry_checks.py tests/test_one_add_path.py \
	tests/test_explain_is_the_score.py tests/test_check_raw_writes.py \
	tests/test_lazy_pool.py tests/test_autotune.py tests/test_index_at_rest.py \
	$(wildcard tests/test_sql.py tests/test_native.py)
LIBASAN = $(shell $(CC) -print-file-name=libasan.so)
LIBUBSAN = $(shell $(CC) -print-file-name=libubsan.so)

.PHONY: test lint soak sanitize sanitize-build clean-sanitize

test:
	$(PYTHON) -m pytest tests -q

lint:
	$(PYTHON) -m ruff check heapmem tests examples bench
	$(PYTHON) -m mypy

soak:
	HEAPMEM_SOAK=1 $(PYTHON) -m pytest tests/test_concurrency.py tests/test_crash.py tests/test_faults.py \
		tests/test_hostile.py tests/test_cfuzz.py tests/test_isolation.py -q -s

sanitize-build:
	rm -rf $(SAN_DIR) build/sanitize-tmp
	HEAPMEM_SANITIZE=1 $(PYTHON) setup.py -q build_ext --build-lib $(SAN_DIR) \
		--build-temp build/sanitize-tmp
	cd heapmem && find . \( -name '*.py' -o -name py.typed \) -not -path '*/__pycache__/*' \
		-exec install -D -m 644 {} $(CURDIR)/$(SAN_DIR)/heapmem/{} \;
	@nm -D $(SAN_DIR)/heapmem/heapmem0.so | grep -q __asan_init \
		|| (echo "sanitize: the library was not built with ASan" && exit 1)

# -p no:cacheprovider: no .pytest_cache writes from the instrumented run;
# cd into the build copy so `import heapmem` finds it, not the source tree
sanitize: sanitize-build
	cd $(SAN_DIR) && \
	LD_PRELOAD="$(LIBASAN) $(LIBUBSAN)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	PYTHONPATH=$(CURDIR)/$(SAN_DIR) \
	$(PYTHON) -c "import heapmem, sys; assert heapmem.__file__.startswith('$(CURDIR)/$(SAN_DIR)'), heapmem.__file__" && \
	LD_PRELOAD="$(LIBASAN) $(LIBUBSAN)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	PYTHONPATH=$(CURDIR)/$(SAN_DIR) \
	$(PYTHON) -m pytest -q -p no:cacheprovider --rootdir=$(CURDIR) \
		$(addprefix $(CURDIR)/,$(SAN_TESTS))

clean-sanitize:
	rm -rf $(SAN_DIR) build/sanitize-tmp
