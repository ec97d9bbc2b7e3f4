# Quarry — one Makefile, flags in one place (STYLE.md §2).
#
#   make deps     install the Debian packages the build, tests and benches need,
#                 and the npm packages of the e2e tests (tests/npm_deps.sh)
#   make          build build/quarry and build/libquarry.a
#   make check    deps + build + unit tests (normal and ASan/UBSan) + fuzz-smoke + e2e
#                 tests; with CI=true (.ci/run) any skipped test fails it
#   make asan     the sanitizer build of the library and unit tests
#   make demo     deps + build + import the sample corpus + serve it
#   make fuzz     every libFuzzer target for FUZZ_SECONDS (make check runs them briefly)
#   make soak     the mixed HTTP + PG soak test for SOAK_SECONDS (default 600)
#   make relevance   nDCG@10 / MAP / Recall@100 on the judged collections
#   make bench    the benchmark against SQLite FTS5 and Xapian
#   make layers   check that #include lines only point downward
#   make pg-extension  install src/pgext (CREATE EXTENSION quarry) into PostgreSQL's
#                 extension folder, $(PG_CONFIG) --sharedir (docs/scale-out.md)

CC       ?= cc
CSTD      = -std=c11 -D_GNU_SOURCE
WARN      = -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
OPT      ?= -O2 -g
PKGS      = icu-uc icu-i18n libcjson snappy libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS   += $(CSTD) $(WARN) $(OPT) -Isrc $(PKG_CFLAGS) -pthread
LDLIBS   += $(PKG_LIBS) -lstemmer -lroaring -lstreamvbyte -lpg_query -lsqlite3 -lssl -lcrypto -lz -lm -pthread
ASAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

BUILD    ?= build
LIB_SRC   = $(wildcard src/store/*.c src/index/*.c src/query/*.c src/query/*/*.c)
SRV_SRC   = $(wildcard src/server/*.c)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
SRV_OBJ   = $(SRV_SRC:%.c=$(BUILD)/obj/%.o)
ASAN_LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/asan/%.o)
ASAN_SRV_OBJ = $(filter-out $(BUILD)/asan/src/server/main.o,$(SRV_SRC:%.c=$(BUILD)/asan/%.o))
NOMAIN_SRV_OBJ = $(filter-out $(BUILD)/obj/src/server/main.o,$(SRV_OBJ))
UNIT_SRC  = $(wildcard tests/unit/*/test_*.c)
UNIT_BIN  = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
ASAN_UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/asan-tests/%)
UNIT_HELPERS = $(wildcard tests/unit/*.c)

# Debian packages: toolchain, libraries, and the peers/clients the tests and
# benches use (nodejs, npm and chromium for the browser and node-postgres
# tests, the JDK and libpostgresql-jdbc-java for JDBC, postgresql-15 for the
# SQL oracle).  `make deps` installs only what is missing, running apt-get
# update first when it must install: a package counts as present when it is
# installed or an installed package provides it (NodeSource's nodejs provides
# npm), so it never fights another source.  Then tests/npm_deps.sh installs
# the npm packages the e2e tests use from their lock files.  Every test runs
# on a fresh machine after it; with CI=true a skipped test fails the run.
DEB_PKGS = gcc make pkg-config ca-certificates python3 gzip \
	libicu-dev libstemmer-dev libmicrohttpd-dev libcjson-dev libsnappy-dev \
	libcriterion-dev libpg-query-dev libroaring-dev libstreamvbyte-dev \
	zlib1g-dev libsqlite3-dev sqlite3 wamerican python3-xapian \
	clang libclang-rt-14-dev curl chromium nodejs npm wrk libssl-dev postgresql-client python3-psycopg2 python3-psycopg python3-sqlalchemy postgresql-15 sphinxsearch python3-pymysql python3-yaml gnuplot-nox libpostgresql-jdbc-java openjdk-17-jdk-headless openssl \
	python3-django python3-pandas pgcli

.PHONY: all deps check unit asan asan-unit e2e demo relevance bench layers clean fuzz fuzz-smoke soak pg-extension

all: $(BUILD)/quarry

deps:
	@present=$$(dpkg-query -W -f='$${db:Status-Abbrev} $${Package} $${Provides}\n' 2>/dev/null | \
	  awk '$$1 == "ii" { $$1 = ""; gsub(/\([^)]*\)/, ""); gsub(/,/, " "); print }' | tr -s ' ' '\n'); \
	missing=""; for p in $(DEB_PKGS); do \
	  printf '%s\n' "$$present" | grep -qxF "$$p" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "make deps: all packages present"; fi
	@tests/npm_deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libquarry.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libquarry-asan.a: $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/quarry: $(SRV_OBJ) $(BUILD)/libquarry.a
	$(CC) $(CFLAGS) -o $@ $(SRV_OBJ) $(BUILD)/libquarry.a $(LDLIBS)

# Unit tests link the engine library; only tests/unit/server/ also link the
# server objects (so the engine's tests never depend on the server building).
$(BUILD)/tests/server/%: tests/unit/server/%.c $(UNIT_HELPERS) $(BUILD)/libquarry.a $(NOMAIN_SRV_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(NOMAIN_SRV_OBJ) $(BUILD)/libquarry.a -lcriterion $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(UNIT_HELPERS) $(BUILD)/libquarry.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(BUILD)/libquarry.a -lcriterion $(LDLIBS)

$(BUILD)/asan-tests/server/%: tests/unit/server/%.c $(UNIT_HELPERS) $(BUILD)/libquarry-asan.a $(ASAN_SRV_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(ASAN_SRV_OBJ) $(BUILD)/libquarry-asan.a -lcriterion $(LDLIBS)

$(BUILD)/asan-tests/%: tests/unit/%.c $(UNIT_HELPERS) $(BUILD)/libquarry-asan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(BUILD)/libquarry-asan.a -lcriterion $(LDLIBS)

# libFuzzer targets (tests/fuzz/*_fuzz.c), built with clang against a
# sanitizer+coverage build of the library and the server objects.
FUZZ_CC    ?= clang
FUZZ_FLAGS  = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_SRC    = $(wildcard tests/fuzz/*_fuzz.c)
FUZZ_BIN    = $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/fuzzobj/%.o)
FUZZ_SRV_OBJ = $(filter-out $(BUILD)/fuzzobj/src/server/main.o,$(SRV_SRC:%.c=$(BUILD)/fuzzobj/%.o))
FUZZ_SECONDS ?= 600

$(BUILD)/fuzzobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) -O1 -g -Isrc $(PKG_CFLAGS) -pthread $(FUZZ_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libquarry-fuzz.a: $(FUZZ_LIB_OBJ) $(FUZZ_SRV_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(BUILD)/libquarry-fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) -O1 -g -Isrc -Itests/fuzz $(PKG_CFLAGS) -pthread -fsanitize=fuzzer,address,undefined \
	  -fno-omit-frame-pointer -fno-sanitize-recover=undefined -o $@ $< $(BUILD)/libquarry-fuzz.a $(LDLIBS)

# A short bounded run of every target (part of make check), and a long one.
fuzz-smoke: $(FUZZ_BIN)
	@tests/run_fuzz.sh $(or $(FUZZ_SMOKE_SECONDS),6) $(FUZZ_BIN)

fuzz: $(FUZZ_BIN)
	@tests/run_fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

unit: $(UNIT_BIN)
	@tests/run_unit.sh $(UNIT_BIN)

# (the server objects are named here so that make builds them for the
# pattern rule of tests/unit/server/ instead of falling back to the plain one)
asan: $(BUILD)/libquarry-asan.a $(ASAN_SRV_OBJ) $(ASAN_UNIT_BIN)

asan-unit: asan
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  tests/run_unit.sh $(ASAN_UNIT_BIN)

e2e: $(BUILD)/quarry
	@BUILD=$(BUILD) tests/run_e2e.sh

check: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory layers
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory asan-unit
	@$(MAKE) --no-print-directory fuzz-smoke
	@$(MAKE) --no-print-directory pg-extension PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	@$(MAKE) --no-print-directory e2e

layers:
	@tests/check_layers.sh

# The coordinator's side of scale-out: SQL files only, nothing to compile.
PG_CONFIG ?= pg_config
pg-extension:
	@dir="$$($(PG_CONFIG) --sharedir)/extension" && \
	  install -m 644 src/pgext/quarry.control src/pgext/quarry--1.0.sql "$$dir"/ && \
	  echo "pg-extension: quarry installed into $$dir"

demo: deps
	@$(MAKE) --no-print-directory all
	@tests/demo.sh

# The soak test alone, long (make check runs it for 60 s).
soak: $(BUILD)/quarry
	@SOAK_SECONDS=$(or $(SOAK_SECONDS),600) E2E_TIMEOUT=$$(( $(or $(SOAK_SECONDS),600) + 1800 )) \
	  E2E_ONLY=test_soak BUILD=$(BUILD) tests/run_e2e.sh

relevance: $(BUILD)/quarry
	@python3 bench/relevance.py

bench: deps $(BUILD)/quarry
	@BUILD=$(BUILD) bench/run

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(SRV_OBJ:.o=.d) $(ASAN_LIB_OBJ:.o=.d) $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_SRV_OBJ:.o=.d)
