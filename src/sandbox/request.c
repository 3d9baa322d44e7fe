/* request.c - typed sandbox requests into `warren sandbox` command lines,
 * and create's answer back (request.h). */
#include "sandbox/request.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct builder {
	struct sandbox_cmdline *cl;
	int err; /* first error, sticky */
};

static void add(struct builder *b, const char *arg)
{
	if (b->err)
		return;
	if (!arg) {
		b->err = -EINVAL;
		return;
	}
	if (b->cl->argc + 1 >= SBX_CMDLINE_MAX) {
		b->err = -E2BIG;
		return;
	}
	b->cl->argv[b->cl->argc++] = (char *)arg;
	b->cl->argv[b->cl->argc] = NULL;
}

static void add_fmt(struct builder *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_fmt(struct builder *b, const char *fmt, ...)
{
	if (b->err)
		return;
	if (b->cl->n_owned >= ARRAY_SIZE(b->cl->owned)) {
		b->err = -E2BIG;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s) {
		b->err = -ENOMEM;
		return;
	}
	b->cl->owned[b->cl->n_owned++] = s;
	add(b, s);
}

/* flag: "--" and the option's name, a literal */
static void opt(struct builder *b, const char *flag, const char *value)
{
	if (!value)
		return;
	add(b, flag);
	add(b, value);
}

static void opt_u64(struct builder *b, const char *flag, uint64_t v)
{
	if (!v)
		return;
	add(b, flag);
	add_fmt(b, "%llu", (unsigned long long)v);
}

static void begin(struct builder *b, struct sandbox_cmdline *out,
		  const char *warren, const char *verb)
{
	memset(out, 0, sizeof(*out));
	b->cl = out;
	b->err = 0;
	add(b, warren);
	add(b, "sandbox");
	add(b, verb);
}

static int finish(struct builder *b)
{
	if (b->err)
		sandbox_cmdline_clear(b->cl);
	return b->err;
}

static char runtime_env[4200];
static void runtime_env_init(void)
{
	const char *dir = getenv("WARREN_RUNTIME_DIR");
	if (dir && dir[0] &&
	    strlen(dir) + sizeof("WARREN_RUNTIME_DIR=") <= sizeof(runtime_env))
		snprintf(runtime_env, sizeof(runtime_env),
			 "WARREN_RUNTIME_DIR=%s", dir);
}

const char *sandbox_runtime_env(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, runtime_env_init);
	return runtime_env[0] ? runtime_env : NULL;
}

static void request_options(struct builder *b, const struct sandbox_request *r)
{
	opt(b, "--" SBX_OPT_NAME, r->name);
	/* always said: WARREN_SANDBOX_BACKEND in the caller's environment
	 * must not change what the server asked for */
	opt(b, "--" SBX_OPT_BACKEND, sandbox_backend_name(r->backend));
	opt(b, "--" SBX_OPT_SNAPSHOT, r->snapshot);
	opt(b, "--" SBX_OPT_DATA, r->data_dir);
	opt(b, "--" SBX_OPT_REF, r->ref);
	opt(b, "--" SBX_OPT_ROOTFS, r->rootfs);
	opt(b, "--" SBX_OPT_UPPER, r->upper);
	for (size_t i = 0; i < r->n_layers && i < SBX_MAX_LAYERS; i++)
		opt(b, "--" SBX_OPT_LAYER, r->layers[i]);
	for (size_t i = 0; i < r->n_binds && i < SBX_MAX_BINDS; i++) {
		add(b, "--" SBX_OPT_BIND);
		add_fmt(b, "%s:%s%s", r->binds[i].source, r->binds[i].dest,
			r->binds[i].read_only ? ":ro" : "");
	}
	for (size_t i = 0; i < r->n_env && i < SBX_MAX_ENV; i++)
		opt(b, "--" SBX_OPT_ENV, r->env[i]);
	opt(b, "--" SBX_OPT_CWD, r->cwd);
	opt_u64(b, "--" SBX_OPT_MEMORY, r->memory_bytes);
	if (r->millicpus) {
		add(b, "--" SBX_OPT_CPUS);
		add_fmt(b, "%.3f", r->millicpus / 1000.0);
	}
	opt_u64(b, "--" SBX_OPT_PIDS, r->pids);
	opt_u64(b, "--" SBX_OPT_DISK, r->disk_bytes);
	opt_u64(b, "--" SBX_OPT_INODES, r->inodes);
	if (r->timeout_ms) {
		add(b, "--" SBX_OPT_TIMEOUT);
		add_fmt(b, "%llums", (unsigned long long)r->timeout_ms);
	}
	if (r->die_with_parent)
		add(b, "--" SBX_OPT_DIE_WITH_PARENT);
	if (r->n_layers > SBX_MAX_LAYERS || r->n_binds > SBX_MAX_BINDS ||
	    r->n_env > SBX_MAX_ENV)
		b->err = b->err ? b->err : -E2BIG;
}

int sandbox_cmdline_create(const char *warren, const struct sandbox_request *req,
			   struct sandbox_cmdline *out)
{
	struct builder b;
	begin(&b, out, warren, "create");
	if (!req->name)
		b.err = -EINVAL;
	request_options(&b, req);
	add(&b, "--" SBX_OPT_JSON);
	return finish(&b);
}

int sandbox_cmdline_run(const char *warren, const struct sandbox_request *req,
			struct sandbox_cmdline *out)
{
	struct builder b;
	begin(&b, out, warren, "run");
	if (!req->argv || !req->argv[0])
		b.err = -EINVAL;
	request_options(&b, req);
	if (req->json)
		add(&b, "--" SBX_OPT_JSON);
	add(&b, "--");
	for (size_t i = 0; req->argv && req->argv[i]; i++)
		add(&b, req->argv[i]);
	return finish(&b);
}

int sandbox_cmdline_exec(const char *warren, const struct sandbox_exec_cmd *req,
			 struct sandbox_cmdline *out)
{
	struct builder b;
	begin(&b, out, warren, "exec");
	add(&b, req->name);
	opt(&b, "--" SBX_OPT_CWD, req->cwd);
	for (size_t i = 0; i < req->n_env && i < SBX_MAX_ENV; i++)
		opt(&b, "--" SBX_OPT_ENV, req->env[i]);
	if (req->n_env > SBX_MAX_ENV && !b.err)
		b.err = -E2BIG;
	if (!req->argv || !req->argv[0])
		b.err = b.err ? b.err : -EINVAL;
	add(&b, "--");
	for (size_t i = 0; req->argv && req->argv[i]; i++)
		add(&b, req->argv[i]);
	return finish(&b);
}

int sandbox_cmdline_remove(const char *warren, const char *name,
			   struct sandbox_cmdline *out)
{
	struct builder b;
	begin(&b, out, warren, "rm");
	add(&b, name);
	return finish(&b);
}

void sandbox_cmdline_clear(struct sandbox_cmdline *cl)
{
	for (size_t i = 0; i < cl->n_owned; i++)
		free(cl->owned[i]);
	memset(cl, 0, sizeof(*cl));
}

int sandbox_create_answer_parse(const char *text,
				struct sandbox_create_answer *out,
				struct wr_error **err)
{
	memset(out, 0, sizeof(*out));
	json_error_t jerr;
	json_t *j = text ? json_loads(text, 0, &jerr) : NULL;
	json_int_t pid = json_integer_value(json_object_get(j, "init_pid"));
	if (!json_is_object(j) || pid <= 0) {
		json_decref(j);
		return wr_error_set(err, EBADMSG,
				    "sandbox create: no init_pid in its answer");
	}
	out->init_pid = (pid_t)pid;
	out->start_ms = json_number_value(json_object_get(j, "start_ms"));
	json_t *sess = json_object_get(j, "session");
	if (json_is_object(sess)) {
		out->session = json_incref(sess);
		out->sync_ms = json_number_value(json_object_get(sess, "sync_ms"));
		out->hooks_ms =
		    json_number_value(json_object_get(sess, "hooks_ms"));
		out->services_ms =
		    json_number_value(json_object_get(sess, "services_ms"));
		const char *commit =
		    json_string_value(json_object_get(sess, "commit"));
		if (commit && strlen(commit) == 40)
			memcpy(out->commit, commit, 41);
	}
	json_decref(j);
	return 0;
}

void sandbox_create_answer_clear(struct sandbox_create_answer *a)
{
	json_decref(a->session);
	memset(a, 0, sizeof(*a));
}
