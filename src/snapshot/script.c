/* script.c - shell scripts for hooks and services (see script.h). */
#include "snapshot/script.h"

#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 'text' with every ' written as '\'' : safe for any bytes but NUL. */
void sh_quote(FILE *f, const char *text)
{
	fputc('\'', f);
	for (const char *p = text; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputc('\'', f);
}

void sh_command(FILE *f, const struct spec_command *cmd)
{
	if (cmd->shell) {
		fputs("sh -c ", f);
		sh_quote(f, cmd->shell);
	} else {
		for (size_t i = 0; cmd->argv && cmd->argv[i]; i++) {
			if (i)
				fputc(' ', f);
			sh_quote(f, cmd->argv[i]);
		}
	}
}

bool sh_command_set(const struct spec_command *cmd)
{
	return cmd->shell || (cmd->argv && cmd->argv[0]);
}

/* "export A="$warren_secret_A" ...; " for the secrets; nothing without. */
static void secret_exports(FILE *f, const struct secret_set *secrets)
{
	if (!secrets || secrets->n == 0)
		return;
	fputs("export", f);
	for (size_t i = 0; i < secrets->n; i++)
		fprintf(f, " %s=\"$warren_secret_%s\"", secrets->v[i].name,
			secrets->v[i].name);
	fputs("; ", f);
}

/* A failing hook prints "@@warren-failed NAME STATUS" and ends the
 * script with that status; the builder reports it with the output tail.
 * With secrets, each command runs in a subshell that exports them. */
static void run_hook(FILE *f, const char *name, const struct spec_hook *hook,
		     const struct secret_set *secrets)
{
	if (hook->kind == SPEC_HOOK_NONE || hook->n_cmds == 0)
		return;
	bool with_secrets = secrets && secrets->n > 0;
	fprintf(f, "echo '@@warren-hook %s'\n", name);
	if (hook->kind != SPEC_HOOK_PARALLEL) {
		if (with_secrets) {
			fputs("( ", f);
			secret_exports(f, secrets);
		}
		sh_command(f, &hook->cmds[0]);
		if (with_secrets)
			fputs(" )", f);
		fprintf(f,
			"\nrc=$?; if [ $rc != 0 ]; then echo \"@@warren-failed "
			"%s $rc\"; exit $rc; fi\n",
			name);
		return;
	}
	/* Named commands run in parallel, each into a file of its own; then
	 * their output is printed member by member, "[NAME] " before each
	 * line, the ones that succeeded first: a failing member is reported
	 * with its own output (the last lines before its failed marker),
	 * never another's. Every failure is reported. */
	for (size_t i = 0; i < hook->n_cmds; i++) {
		fputs("( ", f);
		secret_exports(f, secrets);
		sh_command(f, &hook->cmds[i]);
		fprintf(f,
			" ) >/tmp/.warren-hook.%zu 2>&1 </dev/null & "
			"warren_pid_%zu=$!\n",
			i, i);
	}
	fputs("warren_fail=0\n", f);
	for (size_t i = 0; i < hook->n_cmds; i++)
		fprintf(f, "wait $warren_pid_%zu; warren_rc_%zu=$?\n", i, i);
	for (int failed = 0; failed < 2; failed++) {
		for (size_t i = 0; i < hook->n_cmds; i++) {
			const char *member =
			    hook->cmds[i].name ? hook->cmds[i].name : "?";
			fprintf(f, "if [ $warren_rc_%zu %s 0 ]; then ", i,
				failed ? "!=" : "=");
			/* the error's tail: this member's lines alone */
			if (failed)
				fputs("echo '@@warren-tail-reset'; ", f);
			fputs("sed 's/^/[", f);
			/* a member name is [A-Za-z0-9_.-] (spec.c): safe in
			 * the sed expression */
			fputs(member, f);
			fprintf(f, "] /' /tmp/.warren-hook.%zu; ", i);
			if (failed)
				fprintf(f,
					"echo \"@@warren-failed %s.%s "
					"$warren_rc_%zu\"; "
					"warren_fail=$warren_rc_%zu; ",
					name, member, i, i);
			fputs("fi\n", f);
		}
	}
	fprintf(f, "rm -f");
	for (size_t i = 0; i < hook->n_cmds; i++)
		fprintf(f, " /tmp/.warren-hook.%zu", i);
	fputs("\nif [ $warren_fail != 0 ]; then exit $warren_fail; fi\n", f);
}

void sh_hook(FILE *f, const char *name, const struct spec_hook *hook)
{
	run_hook(f, name, hook, NULL);
}

void sh_hook_secrets(FILE *f, const char *name, const struct spec_hook *hook,
		     const struct secret_set *secrets)
{
	run_hook(f, name, hook, secrets);
}

void sh_secrets_read(FILE *f, const struct secret_set *secrets)
{
	if (!secrets || secrets->n == 0)
		return;
	/* fd 0 is read as it is: reopening /dev/stdin would be refused,
	 * since the pipe belongs to host root, a uid the sandbox does not
	 * map. eval is a builtin: the values are in no argv. */
	fputs("eval \"$(cat)\" || { echo '@@warren-failed secrets 1'; exit 1; "
	      "}\n"
	      "exec </dev/null\n",
	      f);
	for (size_t i = 0; i < secrets->n; i++)
		fprintf(f,
			"[ -n \"${warren_secret_%s+x}\" ] || { echo "
			"'@@warren-failed secrets 1'; exit 1; }\n",
			secrets->v[i].name);
}

void sh_secrets_forget(FILE *f, const struct secret_set *secrets)
{
	if (!secrets || secrets->n == 0)
		return;
	fputs("unset", f);
	for (size_t i = 0; i < secrets->n; i++)
		fprintf(f, " warren_secret_%s", secrets->v[i].name);
	fputc('\n', f);
}

static size_t quoted_len(const char *text, size_t len)
{
	size_t n = len + 2;
	for (size_t i = 0; i < len; i++)
		if (text[i] == '\'')
			n += 3;
	return n;
}

char *sh_secrets_payload(const struct secret_set *secrets, size_t *len)
{
	static const char prefix[] = "warren_secret_";
	size_t total = 1;
	for (size_t i = 0; i < secrets->n; i++)
		total += strlen(prefix) + strlen(secrets->v[i].name) + 1 +
			 quoted_len(secrets->v[i].value, secrets->v[i].len) + 1;
	char *text = wr_malloc(total);
	if (!text)
		return NULL;
	char *p = text;
	for (size_t i = 0; i < secrets->n; i++) {
		const struct secret_value *v = &secrets->v[i];
		p += sprintf(p, "%s%s=", prefix, v->name);
		*p++ = '\'';
		for (size_t k = 0; k < v->len; k++) {
			if (v->value[k] == '\'') {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = v->value[k];
			}
		}
		*p++ = '\'';
		*p++ = '\n';
	}
	*p = '\0';
	*len = (size_t)(p - text);
	return text;
}

void sh_phase(FILE *f, const char *phase)
{
	fprintf(f, "echo \"@@warren-phase %s $(date +%%s%%N)\"\n", phase);
}

void sh_env(FILE *f, const struct spec *spec)
{
	for (size_t i = 0; i < spec->n_container_env; i++) {
		fprintf(f, "export %s=", spec->container_env[i].key);
		sh_quote(f, spec->container_env[i].value);
		fputc('\n', f);
	}
}

/* A probe command for a message inside single quotes: its text, with no
 * quote or newline (they become spaces), at most 200 bytes. */
static void probe_text(FILE *f, const struct spec_command *cmd)
{
	size_t used = 0;
	for (size_t k = 0; cmd->shell ? k == 0 : cmd->argv && cmd->argv[k];
	     k++) {
		const char *t = cmd->shell ? cmd->shell : cmd->argv[k];
		if (k)
			fputc(' ', f);
		for (; *t && used < 200; t++, used++)
			fputc(*t == '\'' || *t == '\n' || *t == '\r' ? ' ' : *t,
			      f);
	}
}

void sh_services_start(FILE *f, const struct spec *spec)
{
	for (size_t i = 0; i < spec->n_services; i++) {
		const struct spec_service *s = &spec->services[i];
		fprintf(f, "echo '@@warren-hook service:%s'\n", s->name);
		fputs("( ", f);
		sh_command(f, &s->start);
		fprintf(
		    f,
		    " ) >/tmp/warren-service-%s.log 2>&1 & warren_svc_%zu=$!\n",
		    s->name, i);
		if (sh_command_set(&s->ready)) {
			/* probe every 10 ms at first, then every 100 ms;
			 * give up after about 60 s, and say it timed out:
			 * the service's log tail, then why */
			fprintf(f, "warren_n=0; warren_d=0.01; until ( ");
			sh_command(f, &s->ready);
			fprintf(
			    f,
			    " ) >/dev/null 2>&1; do warren_n=$((warren_n+1)); "
			    "if [ $warren_n -ge 620 ]; then tail -n 20 "
			    "/tmp/warren-service-%s.log; echo "
			    "'@@warren-why service %s not ready after 60 s "
			    "(probe: ",
			    s->name, s->name);
			probe_text(f, &s->ready);
			fprintf(f,
				")'; echo \"@@warren-failed service:%s-ready "
				"1\"; exit 1; fi; "
				"[ $warren_n -lt 20 ] || warren_d=0.1; sleep "
				"$warren_d; "
				"done\n",
				s->name);
		}
	}
}

void sh_services_stop(FILE *f, const struct spec *spec)
{
	for (size_t i = spec->n_services; i-- > 0;) {
		const struct spec_service *s = &spec->services[i];
		if (sh_command_set(&s->stop)) {
			sh_command(f, &s->stop);
			fputs(" >/dev/null 2>&1\n", f);
		} else {
			fprintf(f, "kill -TERM $warren_svc_%zu 2>/dev/null\n",
				i);
		}
		fprintf(f, "wait $warren_svc_%zu 2>/dev/null\n", i);
	}
}

char *sh_script(void (*body)(FILE *f, const void *arg), const void *arg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	body(f, arg);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
