/* spec.c - finding, reading and checking the environment spec.
 *
 * The document is parsed by jansson (after spec_jsonc_to_json) and then
 * walked key by key into struct spec. Every check names the key path it
 * failed at, which the walk keeps in a struct key_path. Strings are copied
 * out of the jansson document so that struct spec owns what it points to;
 * the document itself is kept as raw for the keys this module ignores. */
#include "snapshot/spec.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPEC_MIN_REFRESH_MS (60ULL * 1000)
#define SPEC_MAX_SECRET_NAME 128
#define SPEC_MAX_PATH 4095
#define SPEC_MAX_HOST 253
#define SPEC_MAX_PIDS 4194304 /* the kernel's PID_MAX_LIMIT */
#define SPEC_MAX_LOCKFILES 1024

/* ---- key paths -------------------------------------------------------- */

/* "customizations.warren.services[1].start", for messages. Keys come from
 * the user: each is cut to 64 bytes and control characters are shown as
 * '?', so a path always fits and prints on one line. */
struct key_path {
	char buf[384];
	size_t len;
};

static size_t path_push_key(struct key_path *p, const char *key)
{
	size_t saved = p->len;
	size_t room = sizeof(p->buf) - 1 - p->len;
	if (p->len && room) {
		p->buf[p->len++] = '.';
		room--;
	}
	for (size_t i = 0; key[i] && i < 64 && room; i++, room--) {
		unsigned char c = (unsigned char)key[i];
		p->buf[p->len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	p->buf[p->len] = '\0';
	return saved;
}

static size_t path_push_index(struct key_path *p, size_t index)
{
	size_t saved = p->len;
	size_t room = sizeof(p->buf) - p->len;
	int n = snprintf(p->buf + p->len, room, "[%zu]", index);
	if (n > 0)
		p->len += (size_t)n < room ? (size_t)n : room - 1;
	return saved;
}

static void path_pop(struct key_path *p, size_t saved)
{
	p->len = saved;
	p->buf[saved] = '\0';
}

/* For the walk over an object's keys: when obj has key (not null), runs
 * call with v set to its value and the path extended by key, and stores
 * its result in r; does nothing once r < 0. Uses p, v and r of the caller. */
#define WITH_KEY(obj, key, call)                                \
	do {                                                    \
		if (r == 0 && (v = member(obj, key)) != NULL) { \
			size_t saved_ = path_push_key(p, key);  \
			r = (call);                             \
			path_pop(p, saved_);                    \
		}                                               \
	} while (0)

/* An optional key of obj: NULL when absent or null. */
static const json_t *member(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return v && !json_is_null(v) ? v : NULL;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER:
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	case JSON_NULL: return "null";
	}
	return "unknown";
}

static int type_error(const struct key_path *p, const char *expected,
		      const json_t *v, struct wr_error **err)
{
	return wr_error_input(err, 0, "%s: expected %s, got %s", p->buf,
			      expected, json_kind(v));
}

static int no_memory(const struct key_path *p, struct wr_error **err)
{
	return wr_error_set(err, ENOMEM, "%s", p->len ? p->buf : "spec");
}

/* A user's value as shown in a message: at most 64 bytes (then "..."),
 * control characters as '?', so that a spec cannot forge log lines. */
struct shown {
	char text[72];
};

static struct shown show(const char *s)
{
	struct shown out;
	size_t i = 0;
	for (; s[i] && i < 64; i++) {
		unsigned char c = (unsigned char)s[i];
		out.text[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	strcpy(out.text + i, s[i] ? "..." : "");
	return out;
}

/* ---- strings and commands --------------------------------------------- */

static int check_length(const struct key_path *p, size_t len,
			struct wr_error **err)
{
	if (len > SPEC_MAX_STRING)
		return wr_error_input(err, 0, "%s: longer than %d bytes",
				      p->buf, SPEC_MAX_STRING);
	return 0;
}

/* Copies a string value (jansson refuses embedded NULs, so the C string is
 * the whole value). */
static int copy_string(const struct key_path *p, const json_t *v, char **out,
		       struct wr_error **err)
{
	if (!json_is_string(v))
		return type_error(p, "a string", v, err);
	int r = check_length(p, json_string_length(v), err);
	if (r < 0)
		return r;
	char *s = wr_strdup(json_string_value(v));
	if (!s)
		return no_memory(p, err);
	*out = s;
	return 0;
}

static int copy_key(const struct key_path *p, const char *key, char **out,
		    struct wr_error **err)
{
	int r = check_length(p, strlen(key), err);
	if (r < 0)
		return r;
	*out = wr_strdup(key);
	return *out ? 0 : no_memory(p, err);
}

void spec_strv_free(char **strv)
{
	if (!strv)
		return;
	for (char **s = strv; *s; s++)
		free(*s);
	free(strv);
}

/* A non-empty array of strings into a NULL-terminated argv. */
static int parse_argv(struct key_path *p, const json_t *v, char ***out,
		      struct wr_error **err)
{
	size_t n = json_array_size(v);
	if (n == 0)
		return wr_error_input(err, 0, "%s: expected a non-empty array",
				      p->buf);
	if (n > SPEC_MAX_ARGV)
		return wr_error_input(err, 0, "%s: more than %d arguments",
				      p->buf, SPEC_MAX_ARGV);
	char **argv = wr_calloc(n + 1, sizeof(*argv));
	if (!argv)
		return no_memory(p, err);
	for (size_t i = 0; i < n; i++) {
		size_t saved = path_push_index(p, i);
		int r = copy_string(p, json_array_get(v, i), &argv[i], err);
		path_pop(p, saved);
		if (r < 0) {
			spec_strv_free(argv);
			return r;
		}
	}
	*out = argv;
	return 0;
}

/* A command: a string (sh -c) or an argv array. */
static int parse_command(struct key_path *p, const json_t *v,
			 struct spec_command *cmd, struct wr_error **err)
{
	if (json_is_string(v))
		return copy_string(p, v, &cmd->shell, err);
	if (json_is_array(v))
		return parse_argv(p, v, &cmd->argv, err);
	return type_error(p, "a string or an array of strings", v, err);
}

static void command_clear(struct spec_command *cmd)
{
	free(cmd->name);
	free(cmd->shell);
	spec_strv_free(cmd->argv);
}

static void commands_free(struct spec_command *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		command_clear(&cmds[i]);
	free(cmds);
}

static int check_count(const struct key_path *p, size_t n, size_t max,
		       const char *what, struct wr_error **err)
{
	if (n > max)
		return wr_error_input(err, 0, "%s: more than %zu %s", p->buf,
				      max, what);
	return 0;
}

/* An object of named commands. Leaves *out NULL for an empty object. */
static int parse_named_commands(struct key_path *p, const json_t *v,
				struct spec_command **out, size_t *n_out,
				struct wr_error **err)
{
	size_t n = json_object_size(v);
	int r = check_count(p, n, SPEC_MAX_COMMANDS, "commands", err);
	if (r < 0 || n == 0)
		return r;
	struct spec_command *cmds = wr_calloc(n, sizeof(*cmds));
	if (!cmds)
		return no_memory(p, err);
	size_t i = 0;
	const char *key;
	json_t *value;
	json_object_foreach((json_t *)v, key, value)
	{
		size_t saved = path_push_key(p, key);
		r = copy_key(p, key, &cmds[i].name, err);
		if (r == 0)
			r = parse_command(p, value, &cmds[i], err);
		path_pop(p, saved);
		i++;
		if (r < 0) {
			commands_free(cmds, i);
			return r;
		}
	}
	*out = cmds;
	*n_out = n;
	return 0;
}

/* One command as the only element of a new array. */
static int parse_single_command(struct key_path *p, const json_t *v,
				struct spec_command **out, size_t *n_out,
				struct wr_error **err)
{
	struct spec_command *cmd = wr_calloc(1, sizeof(*cmd));
	if (!cmd)
		return no_memory(p, err);
	int r = parse_command(p, v, cmd, err);
	if (r < 0) {
		commands_free(cmd, 1);
		return r;
	}
	*out = cmd;
	*n_out = 1;
	return 0;
}

static int parse_hook(struct key_path *p, const json_t *v,
		      struct spec_hook *hook, struct wr_error **err)
{
	int r;
	if (json_is_string(v) || json_is_array(v)) {
		r = parse_single_command(p, v, &hook->cmds, &hook->n_cmds, err);
		if (r == 0)
			hook->kind = json_is_string(v) ? SPEC_HOOK_SHELL
						       : SPEC_HOOK_ARGV;
		return r;
	}
	if (json_is_object(v)) {
		r = parse_named_commands(p, v, &hook->cmds, &hook->n_cmds, err);
		if (r == 0)
			hook->kind =
			    hook->n_cmds ? SPEC_HOOK_PARALLEL : SPEC_HOOK_NONE;
		return r;
	}
	return type_error(p, "a string, an array of strings or an object", v,
			  err);
}

/* verify: see spec.h for how an array is read. */
static int parse_verify(struct key_path *p, const json_t *v,
			struct spec_command **out, size_t *n_out,
			struct wr_error **err)
{
	if (json_is_object(v))
		return parse_named_commands(p, v, out, n_out, err);
	if (!json_is_array(v))
		return parse_single_command(p, v, out, n_out, err);

	bool several = false;
	size_t n = json_array_size(v);
	for (size_t i = 0; i < n; i++)
		several = several || json_is_array(json_array_get(v, i));
	if (!several)
		return parse_single_command(p, v, out, n_out, err);

	int r = check_count(p, n, SPEC_MAX_COMMANDS, "commands", err);
	if (r < 0)
		return r;
	struct spec_command *cmds = wr_calloc(n, sizeof(*cmds));
	if (!cmds)
		return no_memory(p, err);
	for (size_t i = 0; i < n; i++) {
		size_t saved = path_push_index(p, i);
		r = parse_command(p, json_array_get(v, i), &cmds[i], err);
		path_pop(p, saved);
		if (r < 0) {
			commands_free(cmds, i + 1);
			return r;
		}
	}
	*out = cmds;
	*n_out = n;
	return 0;
}

/* ---- environment, ports, lists ---------------------------------------- */

static void env_free(struct spec_env *env, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(env[i].key);
		free(env[i].value);
	}
	free(env);
}

static int parse_env(struct key_path *p, const json_t *v, struct spec_env **out,
		     size_t *n_out, struct wr_error **err)
{
	if (!json_is_object(v))
		return type_error(p, "an object of strings", v, err);
	size_t n = json_object_size(v);
	int r = check_count(p, n, SPEC_MAX_ENV, "variables", err);
	if (r < 0 || n == 0)
		return r;
	struct spec_env *env = wr_calloc(n, sizeof(*env));
	if (!env)
		return no_memory(p, err);
	size_t i = 0;
	const char *key;
	json_t *value;
	json_object_foreach((json_t *)v, key, value)
	{
		size_t saved = path_push_key(p, key);
		if (!*key || strchr(key, '='))
			r = wr_error_input(err, 0,
					   "%s: a variable name must be "
					   "non-empty and without '='",
					   p->buf);
		else
			r = copy_key(p, key, &env[i].key, err);
		if (r == 0)
			r = copy_string(p, value, &env[i].value, err);
		path_pop(p, saved);
		i++;
		if (r < 0) {
			env_free(env, i);
			return r;
		}
	}
	*out = env;
	*n_out = n;
	return 0;
}

/* A port: an integer, or a string "N" or "host:N" of which N is kept. */
static int parse_port(const struct key_path *p, const json_t *v, int *out,
		      struct wr_error **err)
{
	uint64_t port;
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		if (n < 1 || n > 65535)
			return wr_error_input(
			    err, 0, "%s: port %lld is out of range 1-65535",
			    p->buf, (long long)n);
		*out = (int)n;
		return 0;
	}
	if (!json_is_string(v))
		return type_error(p, "an integer or a \"host:port\" string", v,
				  err);
	const char *s = json_string_value(v);
	const char *colon = strrchr(s, ':');
	if ((colon && colon == s) ||
	    wr_parse_uint(colon ? colon + 1 : s, 1, 65535, &port) < 0)
		return wr_error_input(err, 0,
				      "%s: '%s' is not a port 1-65535 or "
				      "\"host:port\"",
				      p->buf, show(s).text);
	*out = (int)port;
	return 0;
}

static int parse_ports(struct key_path *p, const json_t *v, int **out,
		       size_t *n_out, struct wr_error **err)
{
	if (!json_is_array(v))
		return type_error(p, "an array", v, err);
	size_t n = json_array_size(v);
	int r = check_count(p, n, SPEC_MAX_LIST, "ports", err);
	if (r < 0 || n == 0)
		return r;
	int *ports = wr_calloc(n, sizeof(*ports));
	if (!ports)
		return no_memory(p, err);
	for (size_t i = 0; i < n; i++) {
		size_t saved = path_push_index(p, i);
		r = parse_port(p, json_array_get(v, i), &ports[i], err);
		path_pop(p, saved);
		if (r < 0) {
			free(ports);
			return r;
		}
	}
	*out = ports;
	*n_out = n;
	return 0;
}

/* "example.com", "*.example.com", each optionally with ":port": labels of
 * 1-63 letters, digits and '-', 253 bytes at most. */
static bool valid_host(const char *s)
{
	const char *colon = strchr(s, ':');
	size_t len = colon ? (size_t)(colon - s) : strlen(s);
	uint64_t port;
	if (colon && wr_parse_uint(colon + 1, 1, 65535, &port) < 0)
		return false;
	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		s += 2;
		len -= 2;
	}
	if (len == 0 || len > SPEC_MAX_HOST)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == '-') {
			if ((label == 0 && c == '-') || ++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0 && s[len - 1] != '-';
}

static bool valid_secret_name(const char *s)
{
	size_t len = strlen(s);
	if (len == 0 || len > SPEC_MAX_SECRET_NAME ||
	    (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

/* A relative path that stays inside the repository whatever the
 * filesystem holds: no leading '/', no empty, "." or ".." component. */
static bool valid_relative_path(const char *s)
{
	size_t len = strlen(s);
	if (len == 0 || len > SPEC_MAX_PATH)
		return false;
	const char *part = s;
	for (;;) {
		const char *slash = strchr(part, '/');
		size_t n = slash ? (size_t)(slash - part) : strlen(part);
		if (n == 0 || (n == 1 && part[0] == '.') ||
		    (n == 2 && part[0] == '.' && part[1] == '.'))
			return false;
		if (!slash)
			return true;
		part = slash + 1;
	}
}

struct string_list_kind {
	const char *what;	     /* plural, for the cap message */
	bool (*valid)(const char *); /* NULL: any string */
	const char *rule;	     /* why an invalid one is refused */
	bool unique;
};

static const struct string_list_kind egress_kind = {
    "hosts", valid_host,
    "is not a host name (\"example.com\", \"*.example.com\", "
    "\"host:443\")",
    false};
static const struct string_list_kind secrets_kind = {
    "secrets", valid_secret_name,
    "is not a secret name (A-Z, 0-9 and '_', not starting with a digit)", true};
static const struct string_list_kind lockfiles_kind = {
    "lockfiles", valid_relative_path,
    "must be a relative path inside the repository (no leading '/', no "
    "empty, '.' or '..' component)",
    false};

static const struct string_list_kind artifacts_kind = {
    "artifacts", valid_relative_path,
    "must be a relative path inside the repository (no leading '/', no "
    "empty, '.' or '..' component)",
    false};

static int parse_string_list(struct key_path *p, const json_t *v,
			     const struct string_list_kind *kind, char ***out,
			     size_t *n_out, struct wr_error **err)
{
	if (!json_is_array(v))
		return type_error(p, "an array of strings", v, err);
	size_t n = json_array_size(v);
	int r = check_count(p, n, SPEC_MAX_LIST, kind->what, err);
	if (r < 0 || n == 0)
		return r;
	char **list = wr_calloc(n + 1, sizeof(*list));
	if (!list)
		return no_memory(p, err);
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t saved = path_push_index(p, i);
		r = copy_string(p, json_array_get(v, i), &list[i], err);
		if (r == 0 && kind->valid && !kind->valid(list[i]))
			r = wr_error_input(err, 0, "%s: '%s' %s", p->buf,
					   show(list[i]).text, kind->rule);
		for (size_t j = 0; r == 0 && kind->unique && j < i; j++) {
			if (strcmp(list[i], list[j]) == 0)
				r = wr_error_input(err, 0,
						   "%s: '%s' is listed twice",
						   p->buf, show(list[i]).text);
		}
		path_pop(p, saved);
	}
	if (r < 0) {
		spec_strv_free(list);
		return r;
	}
	*out = list;
	*n_out = n;
	return 0;
}

/* ---- services --------------------------------------------------------- */

static void services_free(struct spec_service *services, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(services[i].name);
		command_clear(&services[i].start);
		command_clear(&services[i].ready);
		command_clear(&services[i].stop);
	}
	free(services);
}

static int parse_service(struct key_path *p, const json_t *v,
			 struct spec_service *svc, struct wr_error **err)
{
	if (!json_is_object(v))
		return type_error(p, "an object", v, err);
	static const char *const keys[] = {"name", "start", "ready", "stop"};
	struct spec_command *cmds[] = {NULL, &svc->start, &svc->ready,
				       &svc->stop};
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		const json_t *value = member(v, keys[k]);
		size_t saved = path_push_key(p, keys[k]);
		int r = 0;
		if (!value && k < 2)
			r = wr_error_input(err, 0, "%s: required", p->buf);
		else if (value && k == 0)
			r = copy_string(p, value, &svc->name, err);
		else if (value)
			r = parse_command(p, value, cmds[k], err);
		if (r == 0 && k == 0 && wr_validate_name(svc->name) < 0)
			r = wr_error_input(
			    err, 0,
			    "%s: '%s' is not a valid service name "
			    "(1-63 letters, digits, '_', '.', '-', "
			    "starting with a letter or digit)",
			    p->buf, show(svc->name).text);
		path_pop(p, saved);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_services(struct key_path *p, const json_t *v,
			  struct spec_service **out, size_t *n_out,
			  struct wr_error **err)
{
	if (!json_is_array(v))
		return type_error(p, "an array of objects", v, err);
	size_t n = json_array_size(v);
	int r = check_count(p, n, SPEC_MAX_SERVICES, "services", err);
	if (r < 0 || n == 0)
		return r;
	struct spec_service *services = wr_calloc(n, sizeof(*services));
	if (!services)
		return no_memory(p, err);
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t saved = path_push_index(p, i);
		r = parse_service(p, json_array_get(v, i), &services[i], err);
		for (size_t j = 0; r == 0 && j < i; j++) {
			if (strcmp(services[i].name, services[j].name) == 0)
				r = wr_error_input(
				    err, 0,
				    "%s.name: service '%s' is declared twice",
				    p->buf, show(services[i].name).text);
		}
		path_pop(p, saved);
	}
	if (r < 0) {
		services_free(services, n);
		return r;
	}
	*out = services;
	*n_out = n;
	return 0;
}

/* ---- limits ----------------------------------------------------------- */

/* A size: a string for wr_parse_size or a number of bytes; positive. */
static int parse_size_value(const struct key_path *p, const json_t *v,
			    uint64_t *out, struct wr_error **err)
{
	uint64_t bytes;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 1)
			return wr_error_input(err, 0, "%s: must be positive",
					      p->buf);
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return type_error(p, "a size (\"2G\") or a number of bytes", v,
				  err);
	const char *s = json_string_value(v);
	int r = wr_parse_size(s, &bytes);
	if (r == -ERANGE)
		return wr_error_input(err, 0, "%s: '%s' is too large", p->buf,
				      show(s).text);
	if (r < 0)
		return wr_error_input(err, 0,
				      "%s: '%s' is not a size (\"512M\", "
				      "\"2G\")",
				      p->buf, show(s).text);
	if (bytes == 0)
		return wr_error_input(err, 0, "%s: must be positive", p->buf);
	*out = bytes;
	return 0;
}

/* A duration: a string for wr_parse_duration or a number of seconds. */
static int parse_duration_value(const struct key_path *p, const json_t *v,
				uint64_t *out, struct wr_error **err)
{
	uint64_t ms;
	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		if (n < 1)
			return wr_error_input(err, 0, "%s: must be positive",
					      p->buf);
		if ((uint64_t)n > UINT64_MAX / 1000)
			return wr_error_input(err, 0, "%s: too large", p->buf);
		*out = (uint64_t)n * 1000;
		return 0;
	}
	if (!json_is_string(v))
		return type_error(
		    p, "a duration (\"30m\") or a number of seconds", v, err);
	const char *s = json_string_value(v);
	int r = wr_parse_duration(s, &ms);
	if (r == -ERANGE)
		return wr_error_input(err, 0, "%s: '%s' is too large", p->buf,
				      show(s).text);
	if (r < 0)
		return wr_error_input(err, 0,
				      "%s: '%s' is not a duration (\"90s\", "
				      "\"30m\", \"1h30m\")",
				      p->buf, show(s).text);
	if (ms == 0)
		return wr_error_input(err, 0, "%s: must be positive", p->buf);
	*out = ms;
	return 0;
}

/* CPUs: a number or a decimal string, 0.001 to 1024. Numbers go through
 * the same decimal parser as strings (to the thousandth). */
static int parse_cpus_value(const struct key_path *p, const json_t *v,
			    uint64_t *out, struct wr_error **err)
{
	char text[32];
	const char *s = text;
	if (json_is_integer(v) && json_integer_value(v) >= 1 &&
	    json_integer_value(v) <= 1024) {
		snprintf(text, sizeof(text), "%d", (int)json_integer_value(v));
	} else if (json_is_real(v) && json_real_value(v) > 0 &&
		   json_real_value(v) <= 1024) {
		snprintf(text, sizeof(text), "%.3f", json_real_value(v));
	} else if (json_is_string(v)) {
		s = json_string_value(v);
	} else if (json_is_number(v)) {
		return wr_error_input(
		    err, 0, "%s: must be between 0.001 and 1024", p->buf);
	} else {
		return type_error(p, "a number or a string like \"0.5\"", v,
				  err);
	}
	int r = wr_parse_cpus(s, out);
	if (r == -EINVAL)
		return wr_error_input(err, 0,
				      "%s: '%s' is not a number of CPUs",
				      p->buf, show(s).text);
	if (r < 0)
		return wr_error_input(
		    err, 0, "%s: must be between 0.001 and 1024", p->buf);
	return 0;
}

static int parse_pids_value(const struct key_path *p, const json_t *v,
			    uint64_t *out, struct wr_error **err)
{
	if (!json_is_integer(v))
		return type_error(p, "an integer", v, err);
	json_int_t n = json_integer_value(v);
	if (n < 1 || n > SPEC_MAX_PIDS)
		return wr_error_input(err, 0, "%s: must be between 1 and %d",
				      p->buf, SPEC_MAX_PIDS);
	*out = (uint64_t)n;
	return 0;
}

static int parse_limits(struct key_path *p, const json_t *obj,
			struct spec_limits *lim, struct wr_error **err)
{
	if (!json_is_object(obj))
		return type_error(p, "an object", obj, err);
	const json_t *v;
	int r = 0;
	WITH_KEY(obj, "cpus", parse_cpus_value(p, v, &lim->millicpus, err));
	WITH_KEY(obj, "memory",
		 parse_size_value(p, v, &lim->memory_bytes, err));
	WITH_KEY(obj, "disk", parse_size_value(p, v, &lim->disk_bytes, err));
	WITH_KEY(obj, "pids", parse_pids_value(p, v, &lim->pids, err));
	WITH_KEY(obj, "lifetime",
		 parse_duration_value(p, v, &lim->lifetime_ms, err));
	WITH_KEY(obj, "idle", parse_duration_value(p, v, &lim->idle_ms, err));
	return r;
}

/* ---- the document ----------------------------------------------------- */

void spec_free(struct spec *spec)
{
	if (!spec)
		return;
	free(spec->source);
	struct spec_hook *hooks[] = {&spec->on_create, &spec->update_content,
				     &spec->post_create, &spec->post_start};
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++)
		commands_free(hooks[i]->cmds, hooks[i]->n_cmds);
	env_free(spec->container_env, spec->n_container_env);
	env_free(spec->remote_env, spec->n_remote_env);
	free(spec->forward_ports);
	services_free(spec->services, spec->n_services);
	commands_free(spec->verify, spec->n_verify);
	spec_strv_free(spec->egress);
	spec_strv_free(spec->build_egress);
	spec_strv_free(spec->secrets);
	spec_strv_free(spec->lockfiles);
	spec_strv_free(spec->artifacts);
	json_decref(spec->raw);
	free(spec);
}

static int parse_backend(struct key_path *p, const json_t *v, struct spec *s,
			 struct wr_error **err)
{
	if (!json_is_string(v))
		return type_error(p, "\"native\" or \"gvisor\"", v, err);
	if (sandbox_backend_parse(json_string_value(v), &s->backend) < 0)
		return wr_error_input(err, 0,
				      "%s: expected \"native\" or \"gvisor\", "
				      "got \"%.64s\"",
				      p->buf, json_string_value(v));
	s->backend_set = true;
	return 0;
}

static int parse_warren(struct key_path *p, const json_t *obj, struct spec *s,
			struct wr_error **err)
{
	if (!json_is_object(obj))
		return type_error(p, "an object", obj, err);
	const json_t *v;
	int r = 0;
	WITH_KEY(obj, "services",
		 parse_services(p, v, &s->services, &s->n_services, err));
	WITH_KEY(obj, "verify",
		 parse_verify(p, v, &s->verify, &s->n_verify, err));
	WITH_KEY(obj, "egress",
		 parse_string_list(p, v, &egress_kind, &s->egress, &s->n_egress,
				   err));
	WITH_KEY(obj, "buildEgress",
		 parse_string_list(p, v, &egress_kind, &s->build_egress,
				   &s->n_build_egress, err));
	WITH_KEY(obj, "limits", parse_limits(p, v, &s->limits, err));
	WITH_KEY(obj, "backend", parse_backend(p, v, s, err));
	WITH_KEY(obj, "refresh",
		 parse_duration_value(p, v, &s->refresh_ms, err));
	WITH_KEY(obj, "secrets",
		 parse_string_list(p, v, &secrets_kind, &s->secrets,
				   &s->n_secrets, err));
	WITH_KEY(obj, "lockfiles",
		 parse_string_list(p, v, &lockfiles_kind, &s->lockfiles,
				   &s->n_lockfiles, err));
	WITH_KEY(obj, "artifacts",
		 parse_string_list(p, v, &artifacts_kind, &s->artifacts,
				   &s->n_artifacts, err));
	/* a tenant must not make the server rebuild snapshots back to back */
	if (r == 0 && s->refresh_ms < SPEC_MIN_REFRESH_MS)
		r = wr_error_input(err, 0, "%s.refresh: at least one minute",
				   p->buf);
	return r;
}

static int parse_customizations(struct key_path *p, const json_t *obj,
				struct spec *s, struct wr_error **err)
{
	if (!json_is_object(obj))
		return type_error(p, "an object", obj, err);
	const json_t *v;
	int r = 0;
	WITH_KEY(obj, "warren", parse_warren(p, v, s, err));
	return r;
}

static int parse_document(const json_t *root, struct spec *s,
			  struct wr_error **err)
{
	if (!json_is_object(root))
		return wr_error_input(err, 0,
				      "expected an object at the top level, "
				      "got %s",
				      json_kind(root));
	struct key_path path = {.len = 0};
	struct key_path *p = &path;
	const json_t *v;
	int r = 0;
	WITH_KEY(root, "onCreateCommand", parse_hook(p, v, &s->on_create, err));
	WITH_KEY(root, "updateContentCommand",
		 parse_hook(p, v, &s->update_content, err));
	WITH_KEY(root, "postCreateCommand",
		 parse_hook(p, v, &s->post_create, err));
	WITH_KEY(root, "postStartCommand",
		 parse_hook(p, v, &s->post_start, err));
	WITH_KEY(root, "containerEnv",
		 parse_env(p, v, &s->container_env, &s->n_container_env, err));
	WITH_KEY(root, "remoteEnv",
		 parse_env(p, v, &s->remote_env, &s->n_remote_env, err));
	WITH_KEY(
	    root, "forwardPorts",
	    parse_ports(p, v, &s->forward_ports, &s->n_forward_ports, err));
	WITH_KEY(root, "customizations", parse_customizations(p, v, s, err));
	return r;
}

static void hash_hex(const void *data, size_t len, char hex[65])
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, data, len);
	sodium_bin2hex(hex, 65, digest, sizeof(digest));
}

/* Builds a spec from a parsed document (taking the reference to root). */
static int spec_from_json(json_t *root, const char *source, const char *hash,
			  struct spec **out, struct wr_error **err)
{
	struct spec *s = wr_calloc(1, sizeof(*s));
	if (!s) {
		json_decref(root);
		return wr_error_set(err, ENOMEM, "spec");
	}
	s->raw = root;
	s->refresh_ms = SPEC_DEFAULT_REFRESH_MS;
	memcpy(s->hash, hash, sizeof(s->hash));
	int r = 0;
	if (source && !(s->source = wr_strdup(source)))
		r = wr_error_set(err, ENOMEM, "spec");
	if (r == 0)
		r = parse_document(root, s, err);
	if (r < 0) {
		spec_free(s);
		return r;
	}
	*out = s;
	return 0;
}

int spec_parse(const char *text, size_t len, const char *source,
	       struct spec **out, struct wr_error **err)
{
	if (len > SPEC_MAX_FILE)
		return wr_error_input(err, 0, "larger than %d bytes",
				      SPEC_MAX_FILE);
	char hash[65];
	hash_hex(text, len, hash);

	_cleanup_free_ char *json = NULL;
	size_t json_len;
	int r = spec_jsonc_to_json(text, len, &json, &json_len, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *root =
	    json_loadb(json, json_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		/* jansson leaves the text empty when it fails before it has
		 * read anything: its first allocations */
		if (json_error_code(&jerr) == json_error_out_of_memory ||
		    jerr.text[0] == '\0')
			return wr_error_set(err, ENOMEM, "parse JSON");
		return wr_error_input(err, 0, "line %d, column %d: %s",
				      jerr.line, jerr.column, jerr.text);
	}
	return spec_from_json(root, source, hash, out, err);
}

int spec_defaults(struct spec **out, struct wr_error **err)
{
	json_t *root = json_object();
	if (!root)
		return wr_error_set(err, ENOMEM, "spec");
	return spec_from_json(root, NULL, SPEC_DEFAULTS_HASH, out, err);
}

/* ---- reading from a repository ---------------------------------------- */

/* Opens rel under the repository directory dir_fd without leaving it:
 * RESOLVE_BENEATH makes the kernel refuse (EXDEV) any resolution, through
 * "..", an absolute symlink or a relative one, that would end outside; a
 * symlink to elsewhere in the repository is fine. Magic links (/proc) are
 * refused too. O_NONBLOCK: a FIFO planted as the spec must not hang the
 * open; the file type is checked right after. Returns the fd or -errno. */
static int open_in_repo(int dir_fd, const char *rel, int flags)
{
	if (!(flags & O_PATH))
		flags |= O_NOCTTY | O_NONBLOCK;
	struct open_how how = {
	    .flags = (uint64_t)flags | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dir_fd, rel, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* Reads the regular file rel (at most SPEC_MAX_FILE bytes). -ENOENT
 * without an error when there is no such file. */
static int read_in_repo(int dir_fd, const char *rel, char **out,
			size_t *out_len, struct wr_error **err)
{
	_cleanup_close_ int fd = open_in_repo(dir_fd, rel, O_RDONLY);
	if (fd == -ENOENT || fd == -ENOTDIR) {
		/* absent, unless it is a symlink to nothing: that spec was
		 * meant to be read, so say so rather than use the defaults */
		_cleanup_close_ int link =
		    open_in_repo(dir_fd, rel, O_PATH | O_NOFOLLOW);
		if (link >= 0)
			return wr_error_input(
			    err, 0, "%s: symlink to a missing file", rel);
		return -ENOENT;
	}
	if (fd == -EXDEV)
		return wr_error_input(err, 0,
				      "%s: resolves outside the repository "
				      "(symlink or '..')",
				      rel);
	if (fd < 0)
		return wr_error_input(err, -fd, "open %s", rel);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wr_error_set(err, errno, "stat %s", rel);
	if (!S_ISREG(st.st_mode))
		return wr_error_input(err, 0, "%s: not a regular file", rel);
	if (st.st_size > SPEC_MAX_FILE)
		return wr_error_input(err, 0, "%s: larger than %d bytes", rel,
				      SPEC_MAX_FILE);
	/* a file that grows meanwhile is read up to the size seen here */
	size_t want = (size_t)st.st_size, len = 0;
	_cleanup_free_ char *buf = wr_malloc(want + 1);
	if (!buf)
		return wr_error_set(err, ENOMEM, "read %s", rel);
	while (len < want) {
		ssize_t n = read(fd, buf + len, want - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return wr_error_set(err, errno, "read %s", rel);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = TAKE_PTR(buf);
	*out_len = len;
	return 0;
}

int spec_load(const char *repo_dir, struct spec **out, struct wr_error **err)
{
	static const char *const candidates[] = {
	    ".devcontainer/devcontainer.json",
	    "warren.json",
	};
	_cleanup_close_ int dir_fd =
	    open(repo_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return wr_error_input(err, errno, "repository %s", repo_dir);
	for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		int r = read_in_repo(dir_fd, candidates[i], &text, &len, err);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		r = spec_parse(text, len, candidates[i], out, err);
		if (r < 0)
			return wr_error_wrap(err, "%s", candidates[i]);
		return 0;
	}
	return spec_defaults(out, err);
}

/* ---- lockfiles -------------------------------------------------------- */

static const char *const known_lockfiles[] = {
    "package-lock.json", "yarn.lock",  "pnpm-lock.yaml", "poetry.lock",
    "Pipfile.lock",	 "Cargo.lock", "go.sum",	 "Gemfile.lock",
    "composer.lock",	 "mix.lock",
};

static bool is_known_lockfile(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(known_lockfiles); i++) {
		if (strcmp(name, known_lockfiles[i]) == 0)
			return true;
	}
	return fnmatch("requirements*.txt", name, FNM_PERIOD) == 0;
}

struct strv_builder {
	char **v;
	size_t n, cap;
};

static int strv_add(struct strv_builder *b, const char *s)
{
	if (b->n >= SPEC_MAX_LOCKFILES)
		return -E2BIG;
	if (b->n + 1 >= b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		char **v = wr_realloc(b->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	if (!(b->v[b->n] = wr_strdup(s)))
		return -ENOMEM;
	b->v[++b->n] = NULL;
	return 0;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the regular files in the directory dir_fd that are
 * well-known lockfiles (symlinks are left out: the layer is keyed by what
 * the repository holds). */
static int root_lockfiles(int dir_fd, struct strv_builder *b)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int r = -errno;
		close(fd);
		return r;
	}
	int r = 0;
	struct dirent *de;
	errno = 0;
	while (r == 0 && (de = readdir(dir)) != NULL) {
		struct stat st;
		if (is_known_lockfile(de->d_name) &&
		    fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISREG(st.st_mode))
			r = strv_add(b, de->d_name);
		errno = 0;
	}
	if (r == 0 && errno != 0)
		r = -errno;
	closedir(dir);
	return r;
}

/* Adds spec->lockfiles, sorts, drops duplicates; takes b's strings. */
static char **lockfiles_finish(struct strv_builder *b, const struct spec *spec,
			       int r)
{
	for (size_t i = 0; r == 0 && spec && i < spec->n_lockfiles; i++)
		r = strv_add(b, spec->lockfiles[i]);
	if (r == 0 && !b->v && !(b->v = wr_calloc(1, sizeof(*b->v))))
		r = -ENOMEM;
	if (r < 0) {
		spec_strv_free(b->v);
		errno = -r;
		return NULL;
	}
	qsort(b->v, b->n, sizeof(*b->v), compare_strings);
	size_t kept = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (kept && strcmp(b->v[kept - 1], b->v[i]) == 0)
			free(b->v[i]);
		else
			b->v[kept++] = b->v[i];
	}
	b->v[kept] = NULL;
	return b->v;
}

char **spec_lockfiles(const struct spec *spec, const char *repo_dir)
{
	struct strv_builder b = {NULL, 0, 0};
	_cleanup_close_ int dir_fd =
	    open(repo_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = dir_fd < 0 ? -errno : root_lockfiles(dir_fd, &b);
	return lockfiles_finish(&b, spec, r);
}

char **spec_lockfiles_in(const struct spec *spec, const char *const *root_names)
{
	struct strv_builder b = {NULL, 0, 0};
	int r = 0;
	for (size_t i = 0; r == 0 && root_names && root_names[i]; i++) {
		if (is_known_lockfile(root_names[i]))
			r = strv_add(&b, root_names[i]);
	}
	return lockfiles_finish(&b, spec, r);
}
