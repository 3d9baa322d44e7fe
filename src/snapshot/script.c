/* script.c - shell scripts for hooks and services (see script.h). */
#include "snapshot/script.h"

#include <stdio.h>
#include <stdlib.h>

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

/* A failing hook prints "@@warren-failed NAME STATUS" and ends the
 * script with that status; the builder reports it with the output tail. */
void sh_hook(FILE *f, const char *name, const struct spec_hook *hook)
{
	if (hook->kind == SPEC_HOOK_NONE || hook->n_cmds == 0)
		return;
	fprintf(f, "echo '@@warren-hook %s'\n", name);
	if (hook->kind != SPEC_HOOK_PARALLEL) {
		sh_command(f, &hook->cmds[0]);
		fprintf(f,
			"\nrc=$?; if [ $rc != 0 ]; then echo \"@@warren-failed "
			"%s $rc\"; exit $rc; fi\n",
			name);
		return;
	}
	/* named commands run in parallel; every failure is reported */
	for (size_t i = 0; i < hook->n_cmds; i++) {
		fputs("( ", f);
		sh_command(f, &hook->cmds[i]);
		fprintf(f, " ) & warren_pid_%zu=$!\n", i);
	}
	fputs("warren_fail=0\n", f);
	for (size_t i = 0; i < hook->n_cmds; i++) {
		fprintf(
		    f,
		    "wait $warren_pid_%zu; rc=$?; if [ $rc != 0 ]; then echo "
		    "\"@@warren-failed %s.%s $rc\"; warren_fail=$rc; fi\n",
		    i, name, hook->cmds[i].name ? hook->cmds[i].name : "?");
	}
	fputs("if [ $warren_fail != 0 ]; then exit $warren_fail; fi\n", f);
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
			 * give up after about 60 s */
			fprintf(f, "warren_n=0; warren_d=0.01; until ( ");
			sh_command(f, &s->ready);
			fprintf(
			    f,
			    " ) >/dev/null 2>&1; do warren_n=$((warren_n+1)); "
			    "if [ $warren_n -ge 620 ]; then echo "
			    "\"@@warren-failed "
			    "service:%s-ready 1\"; tail -n 20 "
			    "/tmp/warren-service-%s.log; exit 1; fi; "
			    "[ $warren_n -lt 20 ] || warren_d=0.1; sleep "
			    "$warren_d; "
			    "done\n",
			    s->name, s->name);
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
