# Warren - build, test, benchmark, demo.
#
#   make              build build/warren and build/warren-init
#   make check        run every test; ends with "N passed, N failed"
#   make unit         the unit tests alone, as any user (no root, nothing
#                     installed); the same summary line
#   make check SAN=1  the same with ASan + UBSan
#   make bench        benchmarks (docs/benchmarks.md)
#   make demo         a short tour: sandbox, snapshots, warren serve sessions
#   make fuzz         run the fuzz targets for a while (clang/libFuzzer)
#
# Run as root, `make` first installs any missing Debian packages (`make unit`
# never does).

CC      ?= cc
BUILD   ?= build
SAN     ?= 0
DEBIAN_PACKAGES := gcc make pkg-config libseccomp-dev libjansson-dev e2fsprogs \
                   libcmocka-dev musl-tools libsodium-dev git \
                   libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev \
                   libpsl-dev libpq-dev libarchive-dev

# what the tests use besides the build (script, setpriv, pgrep, PostgreSQL
# for the service fixture and the store's tests against its second backend)
TEST_PACKAGES := bsdutils util-linux procps git postgresql postgresql-15 curl wrk sqlite3 python3 jq chromium nodejs cmake \
                 docker-registry apache2-utils openssl

# where scripts/fetch-agent-packages.sh keeps the agent presets' tarballs
# for the tests (tests/integration/agents_layer.sh reads the same default)
AGENT_PACKAGES ?= /var/cache/warren-test/agents

# libpq's headers live in their own directory (the store's PostgreSQL
# backend, src/store/pg*.c)
PQ_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
CFLAGS_COMMON := -std=c17 -D_GNU_SOURCE -Isrc $(PQ_CFLAGS) -g -O2 -Wall -Wextra \
  -Werror=implicit-function-declaration -Werror=return-type \
  -Werror=incompatible-pointer-types -Werror=int-conversion \
  -Wshadow -Wformat=2 -Wno-format-nonliteral -Wno-format-truncation -Wmissing-prototypes \
  -Wstrict-prototypes -fstack-protector-strong -D_FORTIFY_SOURCE=2
# The warren binary is on every sandbox's start path: linked statically it
# execs in a fraction of the time (ARCHITECTURE.md, "Keep the sandbox path
# lean"). Sanitizer builds need the dynamic runtime.
STATIC  := -static
ifeq ($(SAN),1)
  BUILD := build/san
  SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  STATIC :=
endif
CFLAGS  += $(CFLAGS_COMMON) $(SANFLAGS)
LDFLAGS += $(SANFLAGS)
LIBS    := -lseccomp -ljansson -lsodium

UTIL_SRC    := src/util/alloc.c src/util/error.c src/util/fdpass.c src/util/fs.c src/util/url.c src/util/proc.c src/util/spawn.c src/util/gitenv.c \
               src/util/parse.c src/util/log.c src/util/json_alloc.c src/util/capbuf.c
SANDBOX_SRC := $(wildcard src/sandbox/*.c)
SNAPSHOT_SRC := $(wildcard src/snapshot/*.c)
# the egress proxy (threads, sockets, getaddrinfo) and the credential
# broker (threads, sockets, git processes), and the session server under
# both, belong to the server alone: the lean static `warren` must not link
# them
EGRESS_SRC  := $(wildcard src/security/egress*.c) $(wildcard src/security/broker*.c) \
               src/security/session_server.c
# the audit chain and the secrets' files in the store: the server's
# side (they call the store)
AUDIT_STORE_SRC := src/security/audit_store.c src/security/secrets_store.c
SECURITY_SRC := $(filter-out $(EGRESS_SRC) $(AUDIT_STORE_SRC),$(wildcard src/security/*.c))
CLI_SRC     := $(wildcard src/cli/*.c)
LIB_SRC     := $(UTIL_SRC) $(SANDBOX_SRC) $(SNAPSHOT_SRC) $(SECURITY_SRC)
LIB_OBJ     := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

# The control plane is its own executable (`warren serve` execs it): it
# links the heavy libraries the lean sandbox path must not carry.
SERVER_SRC  := $(wildcard src/store/*.c src/session/*.c src/sched/*.c src/perimeter/*.c src/api/*.c src/agent/*.c src/notify/*.c \
                             src/review/*.c src/meter/*.c src/gateway/*.c src/agents/*.c src/blobs/*.c) $(EGRESS_SRC) \
               $(AUDIT_STORE_SRC)
SERVER_OBJ  := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
SERVE_SRC   := $(wildcard src/cli/serve/*.c)
SERVE_OBJ   := $(SERVE_SRC:%.c=$(BUILD)/obj/%.o)
# (-lpsl: the egress allowlist refuses public suffixes, egress_policy.c)
SERVER_LIBS := -lmicrohttpd -lsqlite3 -lpq -lcurl -ljansson -lsodium -lseccomp -lpthread -lpsl
# The API client verbs (`warren run|sessions|show|logs|send|cancel|repo`).
CLIENT_SRC  := $(wildcard src/cli/client/*.c)
CLIENT_OBJ  := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_LIBS := -lcurl -ljansson -lm

# `warren snapshot push|pull` (src/cli/registry/main.c, which `warren`
# execs): snapshots to and from an OCI registry, layers as tar archives
# through libarchive, the registry through libcurl (src/blobs/).
# gc with --store reads the control plane's store (src/cli/registry/refs.c):
# the store's backends are linked too (and Slack's outbox, which they hold).
REGISTRY_SRC := $(wildcard src/cli/registry/*.c src/registry/*.c src/blobs/*.c src/store/*.c) \
                src/notify/outbox.c src/cli/output.c
REGISTRY_OBJ := $(REGISTRY_SRC:%.c=$(BUILD)/obj/%.o)
REGISTRY_LIBS := -larchive -lcurl -ljansson -lsodium -lseccomp -lsqlite3 -lpq -lpthread

# The egress proxy of one snapshot build (src/cli/proxy/main.c), which
# `warren snapshot build` runs beside the build's sandboxes: the proxy of
# warren serve, on its own.
PROXY_SRC   := $(wildcard src/cli/proxy/*.c) src/security/egress.c \
               src/security/egress_policy.c src/security/session_server.c \
               $(UTIL_SRC)
PROXY_OBJ   := $(PROXY_SRC:%.c=$(BUILD)/obj/%.o)

# warren-init runs in every sandbox: static, libc only, as small as we can.
INIT_CC     := $(shell command -v musl-gcc 2>/dev/null || echo $(CC))
INIT_SRC    := src/init/init.c src/sandbox/proto.c src/util/alloc.c \
               src/util/fdpass.c
INIT_CFLAGS := -std=c17 -D_GNU_SOURCE -Isrc -Os -Wall -Wextra -static \
  -Werror=implicit-function-declaration -fno-asynchronous-unwind-tables

UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
PROBE       := $(BUILD)/tests/probe
# test hooks the integration tests run (tests/tools/*.c)
TEST_TOOLS  := $(BUILD)/tests/agents_layer_build $(BUILD)/tests/blobs_tool

BINARIES    := $(BUILD)/warren $(BUILD)/warren-init $(BUILD)/warren-serve \
               $(BUILD)/warren-client $(BUILD)/warren-relay \
               $(BUILD)/warren-git-connect $(BUILD)/warren-egress \
               $(BUILD)/warren-registry

.PHONY: all deps test-deps check unit bench demo clean fuzz format
all: deps $(BINARIES)

# Install what the build (or the tests) need on a fresh Debian 12 machine
# (root only).
deps: PACKAGES = $(DEBIAN_PACKAGES)
test-deps: PACKAGES = $(TEST_PACKAGES)
deps test-deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; }; \
	  else echo "missing Debian packages:$$missing (run make as root to install)"; exit 1; fi; \
	fi
	@# the gvisor backend's tests: runsc from bookworm-backports
	@if [ "$@" = test-deps ]; then sh scripts/install-runsc.sh; fi
	@# the browser tests' npm (tests/browser): Debian's, unless node came with its own
	@if [ "$@" = test-deps ] && ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing: npm"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >/dev/null || \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >/dev/null; }; \
	  else echo "missing: npm (run make as root to install)"; exit 1; fi; \
	fi
	@# the agents layer's tests: the presets' npm tarballs, fetched once
	@# from the registry (tests/integration/agents_layer.sh serves them;
	@# without them it says it skipped)
	@if [ "$@" = test-deps ]; then sh scripts/fetch-agent-packages.sh $(AGENT_PACKAGES) || \
	  echo "warning: the agent packages were not fetched: agents_layer.sh will skip"; fi

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $<"; $(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/warren: $(CLI_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) $(STATIC) -o $@ $^ $(LIBS)

$(BUILD)/warren-serve: $(SERVE_OBJ) $(SERVER_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

$(BUILD)/warren-registry: $(REGISTRY_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(REGISTRY_LIBS)

$(BUILD)/warren-egress: $(PROXY_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -ljansson -lpthread -lpsl

$(BUILD)/warren-client: $(CLIENT_OBJ) $(BUILD)/obj/src/util/alloc.o \
                        $(BUILD)/obj/src/util/error.o $(BUILD)/obj/src/util/parse.o \
                        $(BUILD)/obj/src/util/json_alloc.o $(BUILD)/obj/src/util/capbuf.o \
                        $(BUILD)/obj/src/util/fs.o $(BUILD)/obj/src/util/spawn.o \
                        $(BUILD)/obj/src/util/proc.o $(BUILD)/obj/src/util/gitenv.o \
                        $(BUILD)/obj/src/snapshot/jsonc.o
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS)

$(BUILD)/warren-init: $(INIT_SRC) src/sandbox/proto.h src/util/alloc.h \
                      src/util/fdpass.h
	@mkdir -p $(dir $@)
	$(INIT_CC) $(INIT_CFLAGS) -o $@ $(INIT_SRC)
	strip $@

# The egress relay inside a sandbox (src/init/relay.c): like warren-init,
# static and libc only; the server binds it in next to the warren binary.
$(BUILD)/warren-relay: src/init/relay.c src/util/fdpass.c src/util/fdpass.h
	@mkdir -p $(dir $@)
	$(INIT_CC) $(INIT_CFLAGS) -o $@ src/init/relay.c src/util/fdpass.c
	strip $@

# git's transport to the credential broker inside a sandbox, and the
# broker's proc-receive hook on the host (src/init/gitconnect.c): static,
# libc only, bound in next to the relay.
$(BUILD)/warren-git-connect: src/init/gitconnect.c
	@mkdir -p $(dir $@)
	$(INIT_CC) $(INIT_CFLAGS) -o $@ src/init/gitconnect.c
	strip $@

# test_request reads what request.c builds with the CLI's own parser
$(BUILD)/tests/test_request: tests/unit/test_request.c $(filter-out %/main.o,$(CLI_OBJ)) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS) -lcmocka

# test_eval_report: the report's arithmetic, from the client's own files
CLIENT_TEST_OBJ := $(filter-out %/main.o,$(CLIENT_OBJ)) \
	$(addprefix $(BUILD)/obj/src/,util/alloc.o util/error.o util/parse.o \
	  util/json_alloc.o util/capbuf.o util/fs.o util/spawn.o util/proc.o \
	  util/gitenv.o snapshot/jsonc.o)
$(BUILD)/tests/test_eval_report: tests/unit/test_eval_report.c $(CLIENT_TEST_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lcmocka

$(BUILD)/tests/test_%: tests/unit/test_%.c $(SERVER_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS) -lcmocka

# agents_layer_ensure from the command line (tests/integration/agents_layer.sh)
$(BUILD)/tests/agents_layer_build: tests/tools/agents_layer_build.c $(SERVER_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

# the registry client from the command line (tests/integration/blobs_registry.sh)
$(BUILD)/tests/blobs_tool: tests/tools/blobs_tool.c $(SERVER_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

# The posture probe runs inside sandboxes: static, so it needs nothing there.
$(PROBE): tests/security/probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O1 -Wall -Wextra -static -o $@ $<

$(BUILD)/bench/sandbox: bench/sandbox.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -o $@ $<

# the store's claim latency, SQLite and PostgreSQL (bench/claim.sh)
$(BUILD)/bench/claim: bench/claim.c $(SERVER_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

check: all test-deps $(UNIT_TESTS) $(PROBE) $(TEST_TOOLS)
	@BUILD=$(BUILD) SAN=$(SAN) tests/run.sh

# No deps/test-deps: nothing is installed, and root is not needed. The
# binaries are built too: a few unit tests run them (test_tools creates a
# sandbox when run as root, test_broker runs warren-git-connect).
unit: $(BINARIES) $(UNIT_TESTS)
	@BUILD=$(BUILD) SAN=$(SAN) tests/run.sh --unit

bench: all $(BUILD)/bench/sandbox $(BUILD)/bench/claim
	@BUILD=$(BUILD) bench/run.sh

demo: all
	@BUILD=$(BUILD) scripts/demo.sh

fuzz: all
	@BUILD=$(BUILD) tests/fuzz/run.sh

format:
	clang-format -i $(LIB_SRC) $(CLI_SRC) $(SERVER_SRC) $(CLIENT_SRC) \
	  $(REGISTRY_SRC) src/cli/serve/*.c src/init/*.c src/*/*.h

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) \
  $(SERVE_OBJ:.o=.d) $(CLIENT_OBJ:.o=.d) $(REGISTRY_OBJ:.o=.d)
