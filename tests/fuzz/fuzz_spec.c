/* fuzz_spec.c - libFuzzer target for src/snapshot/spec.c and jsonc.c.
 *
 * The input is a spec file. It goes through spec_jsonc_to_json and then
 * spec_parse. Besides memory safety (ASan/UBSan), results are checked
 * against properties that must hold for any input; a violation abort()s so
 * the fuzzer keeps the input:
 *   - the conversion keeps the length and every newline, and changes bytes
 *     only into spaces; on failure it writes no output and sets an input
 *     error;
 *   - input that jansson accepts as plain JSON converts to itself;
 *   - spec_parse fails with an error (and no spec), or gives a spec within
 *     the documented shape: hook kinds that match their commands, exactly
 *     one of shell/argv per command, ports 1-65535, every count within its
 *     cap, service and secret names valid, lockfiles relative without "..",
 *     refresh at least a minute, the SHA-256 of the bytes as hash. */
#include "snapshot/spec.h"

#include "util/parse.h"

#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_spec: %s\n", what);
		abort();
	}
}

static void check_jsonc(const char *in, size_t len)
{
	char *out = NULL;
	size_t out_len = 0;
	struct wr_error *err = NULL;
	int r = spec_jsonc_to_json(in, len, &out, &out_len, &err);
	if (r < 0) {
		check(r == -EINVAL, "jsonc: unexpected error code");
		check(out == NULL, "jsonc: failed but wrote its output");
		check(err && err->bad_input, "jsonc: failure without an error");
		check(strncmp(err->msg, "line ", 5) == 0,
		      "jsonc: error without a line");
		wr_error_free(err);
		return;
	}
	check(err == NULL, "jsonc: success with an error");
	check(out_len == len, "jsonc: length changed");
	check(out[len] == '\0', "jsonc: output not NUL-terminated");
	for (size_t i = 0; i < len; i++) {
		check(out[i] == in[i] || out[i] == ' ',
		      "jsonc: a byte became something other than a space");
		check((in[i] == '\n') == (out[i] == '\n'),
		      "jsonc: a newline was added or removed");
	}
	json_error_t jerr;
	json_t *plain = json_loadb(in, len, 0, &jerr);
	if (plain) {
		check(memcmp(in, out, len) == 0,
		      "jsonc: changed input that is plain JSON");
		json_decref(plain);
	}
	free(out);
}

static void check_command(const struct spec_command *cmd, int optional)
{
	if (optional && !cmd->shell && !cmd->argv)
		return;
	check(!cmd->shell != !cmd->argv, "command: not exactly one form");
	if (cmd->argv) {
		size_t n = 0;
		while (cmd->argv[n])
			n++;
		check(n >= 1 && n <= SPEC_MAX_ARGV, "command: argv size");
	}
	if (cmd->shell)
		check(strlen(cmd->shell) <= SPEC_MAX_STRING,
		      "command: string too long");
}

static void check_hook(const struct spec_hook *hook)
{
	switch (hook->kind) {
	case SPEC_HOOK_NONE:
		check(hook->n_cmds == 0 && !hook->cmds, "hook: none with cmds");
		return;
	case SPEC_HOOK_SHELL:
	case SPEC_HOOK_ARGV:
		check(hook->n_cmds == 1 && !hook->cmds[0].name,
		      "hook: single form with a count or a name");
		check((hook->kind == SPEC_HOOK_SHELL) ==
			  (hook->cmds[0].shell != NULL),
		      "hook: kind does not match the command");
		break;
	case SPEC_HOOK_PARALLEL:
		check(hook->n_cmds >= 1 && hook->n_cmds <= SPEC_MAX_COMMANDS,
		      "hook: parallel count");
		break;
	default: check(0, "hook: kind out of range");
	}
	for (size_t i = 0; i < hook->n_cmds; i++) {
		check_command(&hook->cmds[i], 0);
		check((hook->kind == SPEC_HOOK_PARALLEL) ==
			  (hook->cmds[i].name != NULL),
		      "hook: names only in the object form");
	}
}

static void check_strv(char **v, size_t n, size_t max)
{
	check(n <= max, "list over its cap");
	check((n == 0) == (v == NULL), "list: count and array disagree");
	for (size_t i = 0; i < n; i++)
		check(v[i] != NULL, "list: NULL entry");
	if (v)
		check(v[n] == NULL, "list: not NULL-terminated");
}

static void check_spec(const struct spec *s, const uint8_t *data, size_t size)
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	char hex[65];
	crypto_hash_sha256(digest, data, size);
	sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
	check(strcmp(hex, s->hash) == 0, "hash is not the SHA-256 of input");
	check(json_is_object(s->raw), "raw is not an object");
	check(s->source && strcmp(s->source, "fuzz.json") == 0, "source");

	check_hook(&s->on_create);
	check_hook(&s->update_content);
	check_hook(&s->post_create);
	check_hook(&s->post_start);

	check(s->n_container_env <= SPEC_MAX_ENV &&
		  s->n_remote_env <= SPEC_MAX_ENV,
	      "env over its cap");
	for (size_t i = 0; i < s->n_container_env; i++)
		check(s->container_env[i].key[0] &&
			  !strchr(s->container_env[i].key, '='),
		      "env: bad name");
	for (size_t i = 0; i < s->n_remote_env; i++)
		check(s->remote_env[i].key[0] &&
			  !strchr(s->remote_env[i].key, '='),
		      "env: bad name");

	check(s->n_forward_ports <= SPEC_MAX_LIST, "ports over their cap");
	for (size_t i = 0; i < s->n_forward_ports; i++)
		check(s->forward_ports[i] >= 1 && s->forward_ports[i] <= 65535,
		      "port out of range");

	check(s->n_services <= SPEC_MAX_SERVICES, "services over their cap");
	for (size_t i = 0; i < s->n_services; i++) {
		const struct spec_service *svc = &s->services[i];
		check(wr_validate_name(svc->name) == 0, "service: bad name");
		for (size_t j = 0; j < i; j++)
			check(strcmp(svc->name, s->services[j].name) != 0,
			      "service: duplicate name");
		check_command(&svc->start, 0);
		check_command(&svc->ready, 1);
		check_command(&svc->stop, 1);
	}

	check(s->n_verify <= SPEC_MAX_COMMANDS, "verify over its cap");
	check((s->n_verify == 0) == (s->verify == NULL), "verify: count");
	for (size_t i = 0; i < s->n_verify; i++)
		check_command(&s->verify[i], 0);

	check_strv(s->egress, s->n_egress, SPEC_MAX_LIST);
	check_strv(s->secrets, s->n_secrets, SPEC_MAX_LIST);
	for (size_t i = 0; i < s->n_secrets; i++)
		check(strspn(s->secrets[i],
			     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
			     "0123456789_") == strlen(s->secrets[i]) &&
			  s->secrets[i][0] &&
			  (s->secrets[i][0] < '0' || s->secrets[i][0] > '9'),
		      "secret: bad name");
	check_strv(s->lockfiles, s->n_lockfiles, SPEC_MAX_LIST);
	for (size_t i = 0; i < s->n_lockfiles; i++) {
		const char *p = s->lockfiles[i];
		check(p[0] && p[0] != '/', "lockfile: absolute or empty");
		check(strcmp(p, "..") != 0 && strncmp(p, "../", 3) != 0 &&
			  !strstr(p, "/../") &&
			  (strlen(p) < 3 || strcmp(p + strlen(p) - 3, "/..")),
		      "lockfile: '..' component");
	}

	check(s->refresh_ms >= 60000, "refresh under a minute");
	check(s->limits.millicpus <= 1024000, "cpus over 1024");
	check(s->limits.pids <= 4194304, "pids over the kernel's limit");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* spec_parse refuses more than SPEC_MAX_FILE; nothing to learn there */
	if (size > SPEC_MAX_FILE + 1)
		return 0;
	const char *text = (const char *)data;
	check_jsonc(text, size);

	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_parse(text, size, "fuzz.json", &spec, &err);
	if (r < 0) {
		check(spec == NULL, "spec_parse failed but gave a spec");
		check(err != NULL && err->msg && err->msg[0],
		      "spec_parse failed without a message");
		check(err->bad_input || err->errnum == ENOMEM,
		      "spec_parse: a failure that is not the input's");
		wr_error_free(err);
		return 0;
	}
	check(r == 0 && spec && !err, "spec_parse: success without a spec");
	check_spec(spec, data, size);
	spec_free(spec);
	return 0;
}
