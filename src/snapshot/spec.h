/* spec.h - the environment spec: what a repository declares about the
 * environment its sessions run in (ARCHITECTURE.md, "Snapshots").
 *
 * The spec is the repository's .devcontainer/devcontainer.json, else
 * warren.json at its root, else the defaults. Both files are JSONC (JSON with
 * // and block comments and trailing commas), converted to plain JSON by
 * spec_jsonc_to_json() and parsed with jansson. This module owns finding,
 * reading and checking the file; it runs nothing.
 *
 * Keys (all optional; unknown keys anywhere are ignored but kept in raw;
 * null is the same as an absent key):
 *   onCreateCommand, updateContentCommand   hooks run when a snapshot is built
 *   postCreateCommand, postStartCommand     hooks run when a session starts
 *     a hook is a string (sh -c), a non-empty array of strings (argv), or an
 *     object of named commands (each a string or an argv array) run in
 *     parallel; an empty object is no hook.
 *   containerEnv, remoteEnv     objects of string values
 *   forwardPorts                integers 1-65535, or strings "N"/"host:N"
 *   customizations.warren:
 *     services   [{name, start, ready?, stop?}], commands as in hooks' forms
 *                string or argv; names [A-Za-z0-9][A-Za-z0-9_.-]{0,62},
 *                unique
 *     verify     a string (one shell command); an array of strings (one argv
 *                command); an array of strings and arrays with at least one
 *                array (several commands, each shell or argv); or an object
 *                of named commands
 *     egress     host names: "example.com", "*.github.com", "host:443"
 *                (sessions and snapshot builds)
 *     buildEgress more host names, for snapshot builds only (package
 *                registries): a build reaches egress + buildEgress
 *     limits     {cpus, memory, disk, pids, lifetime, idle}: cpus a number
 *                or "0.5"; memory/disk "2G" or bytes; pids an integer;
 *                lifetime/idle "30m" or seconds. All must be positive.
 *     refresh    "30m" or seconds, at least one minute (default 30m)
 *     secrets    names [A-Z_][A-Z0-9_]* (values come from the server)
 *     artifacts  files of the workspace kept as a session's evidence after
 *                verification (test reports, coverage): relative paths
 *     lockfiles  extra files keying the dependencies layer: relative paths
 *                without "", ".", ".." components or a leading "/"
 *
 * A wrong type or value is an input error (bad_input set, errnum 0, the
 * function returns -EINVAL) whose message starts with the key path, e.g.
 * "customizations.warren.services[1].start: expected a string or an array
 * of strings, got number"; values quoted in messages are cut and stripped
 * of control characters. JSON syntax errors, duplicate keys included, give
 * the line and column in the original file. Caps (exceeding one is an error
 * naming the key) are the SPEC_MAX_* values below. Out of memory is -ENOMEM
 * (jansson reports some of its own allocation failures as syntax errors). */
#ifndef WR_SNAPSHOT_SPEC_H
#define WR_SNAPSHOT_SPEC_H

#include "sandbox/sandbox.h"
#include "util/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SPEC_MAX_FILE (1 << 20)	  /* bytes of the spec file */
#define SPEC_MAX_STRING (1 << 16) /* bytes of any string or object key */
#define SPEC_MAX_COMMANDS 256	  /* commands in a hook or in verify */
#define SPEC_MAX_ARGV 4096	  /* elements of one argv command */
#define SPEC_MAX_SERVICES 64
#define SPEC_MAX_ENV 4096 /* entries of containerEnv, of remoteEnv */
#define SPEC_MAX_LIST 256 /* forwardPorts, egress, secrets, lockfiles */

/* With no spec file: the SHA-256 of no bytes (an empty file is not a valid
 * spec, so no file hashes to this). */
#define SPEC_DEFAULTS_HASH \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

enum spec_hook_kind {
	SPEC_HOOK_NONE,	    /* absent, null or {} */
	SPEC_HOOK_SHELL,    /* one command, cmds[0].shell */
	SPEC_HOOK_ARGV,	    /* one command, cmds[0].argv */
	SPEC_HOOK_PARALLEL, /* named commands, run in parallel */
	SPEC_HOOK_KIND_MAX,
};

/* Exactly one of shell and argv is set, except for an absent optional
 * command (a service's ready or stop), where both are NULL. */
struct spec_command {
	char *name;  /* key in an object form, else NULL */
	char *shell; /* string form, run by sh -c; NULL if argv */
	char **argv; /* NULL-terminated argv form; NULL if shell */
};

struct spec_hook {
	enum spec_hook_kind kind;
	struct spec_command *cmds;
	size_t n_cmds;
};

struct spec_env {
	char *key;
	char *value;
};

struct spec_service {
	char *name;
	struct spec_command start;
	struct spec_command ready; /* optional */
	struct spec_command stop;  /* optional */
};

struct spec_limits { /* 0: not set */
	uint64_t millicpus;
	uint64_t memory_bytes;
	uint64_t pids;
	uint64_t disk_bytes;
	uint64_t lifetime_ms;
	uint64_t idle_ms;
};

/* A snapshot's refresh interval when nothing says one (the spec's
 * customizations.warren.refresh, a repository's own). */
#define SPEC_DEFAULT_REFRESH_MS (30ULL * 60 * 1000)

struct spec {
	char *source;  /* relative path of the file read; NULL: defaults */
	char hash[65]; /* SHA-256 (hex) of the file's bytes, or
			* SPEC_DEFAULTS_HASH */
	struct spec_hook on_create, update_content; /* snapshot time */
	struct spec_hook post_create, post_start;   /* session start */
	struct spec_env *container_env;
	size_t n_container_env;
	struct spec_env *remote_env;
	size_t n_remote_env;
	int *forward_ports;
	size_t n_forward_ports;
	struct spec_service *services;
	size_t n_services;
	struct spec_command *verify;
	size_t n_verify;
	char **egress;
	size_t n_egress;
	char **build_egress; /* snapshot builds only, on top of egress */
	size_t n_build_egress;
	struct spec_limits limits;
	/* customizations.warren.backend: where its sandboxes run (builds,
	 * sessions, verification); unset: the server's sandbox.backend */
	bool backend_set;
	enum sandbox_backend backend;
	uint64_t refresh_ms; /* default 30 minutes */
	char **secrets;
	size_t n_secrets;
	char **lockfiles; /* extra files from the spec, as written */
	size_t n_lockfiles;
	char **artifacts; /* files collected as evidence after verify */
	size_t n_artifacts;
	json_t *raw; /* the whole document, unknown keys included ({} for the
		      * defaults) */
};

/* Converts JSONC to JSON of the same length: comments become spaces (their
 * newlines stay, so line and column numbers still match the original) and
 * so do trailing commas before } or ]; strings are copied byte for byte.
 * *out is NUL-terminated. Fails (input error) on an unterminated string or
 * block comment, naming the line where it starts. */
int spec_jsonc_to_json(const char *in, size_t len, char **out, size_t *out_len,
		       struct wr_error **err);

/* Parses and checks the spec text (at most SPEC_MAX_FILE bytes) read from
 * source (kept in the result; NULL allowed). */
int spec_parse(const char *text, size_t len, const char *source,
	       struct spec **out, struct wr_error **err);

/* Finds and parses the spec of the repository checked out at repo_dir; with
 * no file, *out holds the defaults. The file is opened relative to the
 * repository and may not resolve outside it (openat2 RESOLVE_BENEATH: a
 * symlink within the repository is followed, one leading out is an error,
 * and so is a dangling one); it must be a regular file of at most
 * SPEC_MAX_FILE bytes. Errors are prefixed with the file's relative path. */
int spec_load(const char *repo_dir, struct spec **out, struct wr_error **err);

/* The defaults (what spec_load gives for a repository without a spec). */
int spec_defaults(struct spec **out, struct wr_error **err);

void spec_free(struct spec *spec);

static inline void spec_freep(struct spec **spec)
{
	spec_free(*spec);
	*spec = NULL;
}

/* The files that key the dependencies layer: the well-known lockfiles that
 * are regular files at the repository root (package-lock.json, yarn.lock,
 * pnpm-lock.yaml, requirements*.txt, poetry.lock, Pipfile.lock, Cargo.lock,
 * go.sum, Gemfile.lock, composer.lock, mix.lock) plus spec->lockfiles
 * (whether present or not; spec may be NULL). Relative paths, sorted, without
 * duplicates, NULL-terminated; free with spec_strv_free(). NULL with errno
 * set on failure (E2BIG: more than 1024 entries). */
char **spec_lockfiles(const struct spec *spec, const char *repo_dir);

/* The same for a repository that is not checked out (a bare mirror): picks
 * the well-known names out of root_names, the NULL-terminated names of the
 * entries at the repository root (the caller filters out what is not a
 * regular file), and adds spec->lockfiles. */
char **spec_lockfiles_in(const struct spec *spec,
			 const char *const *root_names);

/* Frees a NULL-terminated array of strings and the strings; NULL is fine. */
void spec_strv_free(char **strv);

#endif
