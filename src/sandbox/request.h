/* request.h - the sandbox boundary as typed requests and answers.
 *
 * The server never creates a sandbox itself: it runs the lean, static
 * `warren` (ARCHITECTURE.md, "Keep the sandbox path lean"). What it asks
 * is a typed request below; this module is the one place that turns a
 * request into that command line, and an answer (`--json`) back into a
 * structure. The option names are defined here once and used by the
 * `warren sandbox` parser as well (cli/sandbox.c), so the two cannot drift
 * apart; tests/unit/test_request.c parses what is built here.
 *
 * Strings in a request are borrowed; a sandbox_cmdline owns what it had to
 * format (numbers, binds) until sandbox_cmdline_clear(). */
#ifndef WR_SANDBOX_REQUEST_H
#define WR_SANDBOX_REQUEST_H

#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Option names (without "--"), shared with cli/sandbox.c. */
#define SBX_OPT_NAME "name"
#define SBX_OPT_BACKEND "backend"
#define SBX_OPT_SNAPSHOT "snapshot"
#define SBX_OPT_DATA "data"
#define SBX_OPT_REF "ref"
#define SBX_OPT_UPPER "upper"
#define SBX_OPT_LAYER "layer"
#define SBX_OPT_ROOTFS "rootfs"
#define SBX_OPT_BIND "bind"
#define SBX_OPT_ENV "env"
#define SBX_OPT_CWD "cwd"
#define SBX_OPT_HOSTNAME "hostname"
#define SBX_OPT_MEMORY "memory"
#define SBX_OPT_CPUS "cpus"
#define SBX_OPT_PIDS "pids"
#define SBX_OPT_DISK "disk"
#define SBX_OPT_INODES "inodes"
#define SBX_OPT_TIMEOUT "timeout"
#define SBX_OPT_NET "net"
#define SBX_OPT_JSON "json"
#define SBX_OPT_ALLOW_USERNS "allow-userns"
#define SBX_OPT_DIE_WITH_PARENT "die-with-parent"

#define SBX_MAX_LAYERS 16
#define SBX_MAX_BINDS 16
#define SBX_MAX_ENV 32
#define SBX_CMDLINE_MAX 256

/* create (a long-lived sandbox) or run (a one-off command). */
struct sandbox_request {
	const char *name; /* create: required; run: NULL (generated) */
	enum sandbox_backend backend;
	const char *snapshot; /* a snapshot's id, with data_dir */
	const char *data_dir;
	const char *ref; /* with snapshot: bring the workspace there */
	const char *rootfs;
	const char *upper;
	const char *layers[SBX_MAX_LAYERS];
	size_t n_layers;
	struct sandbox_bind binds[SBX_MAX_BINDS];
	size_t n_binds;
	const char *env[SBX_MAX_ENV]; /* "K=V" */
	size_t n_env;
	const char *cwd;
	uint64_t memory_bytes; /* 0: the default */
	uint64_t millicpus;
	uint64_t pids;
	uint64_t disk_bytes; /* with upper: the layer's image size */
	uint64_t inodes;     /* with upper and disk_bytes */
	uint64_t timeout_ms;
	bool die_with_parent; /* torn down when the caller dies */
	bool json;	      /* run: print the result as JSON */
	char *const *argv;    /* run: the command */
};

/* exec: a command in a long-lived sandbox. */
struct sandbox_exec_cmd {
	const char *name;
	const char *cwd;	      /* NULL: create's --cwd */
	const char *env[SBX_MAX_ENV]; /* "K=V", on top of create's */
	size_t n_env;
	char *const *argv;
};

struct sandbox_cmdline {
	char *argv[SBX_CMDLINE_MAX]; /* NULL-terminated */
	size_t argc;
	char *owned[SBX_MAX_BINDS + 8]; /* formatted strings argv points to */
	size_t n_owned;
};

/* "WARREN_RUNTIME_DIR=DIR" when this process runs with a runtime
 * directory of its own, for a `warren sandbox` command started with a fixed
 * environment of its own; NULL otherwise. */
const char *sandbox_runtime_env(void);

/* The command lines of `warren sandbox create|run|exec|rm`, warren being
 * the path of the lean binary. -E2BIG if it does not fit, -ENOMEM. */
int sandbox_cmdline_create(const char *warren, const struct sandbox_request *req,
			   struct sandbox_cmdline *out);
int sandbox_cmdline_run(const char *warren, const struct sandbox_request *req,
			struct sandbox_cmdline *out);
int sandbox_cmdline_exec(const char *warren, const struct sandbox_exec_cmd *req,
			 struct sandbox_cmdline *out);
int sandbox_cmdline_remove(const char *warren, const char *name,
			   struct sandbox_cmdline *out);
void sandbox_cmdline_clear(struct sandbox_cmdline *cl);

/* The answer of `warren sandbox create --json`. */
struct sandbox_create_answer {
	pid_t init_pid;
	double start_ms;
	/* from a snapshot: the session's start ("session": sync_ms,
	 * hooks_ms, services_ms, commit, ...); a jansson object owned here,
	 * NULL without a snapshot */
	void *session;
	double sync_ms, hooks_ms, services_ms;
	char commit[41]; /* the workspace's commit, "" if none */
};
/* -EBADMSG with a message when text is not such an answer. */
int sandbox_create_answer_parse(const char *text,
				struct sandbox_create_answer *out,
				struct wr_error **err);
void sandbox_create_answer_clear(struct sandbox_create_answer *a);

#endif
