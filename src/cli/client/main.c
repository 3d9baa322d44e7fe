/* main.c - `warren-client`: dispatch a control-plane verb. `warren`
 * (src/cli/main.c) execs us with its own argv, so argv[1] is the verb. */
#include "cli/client/client.h"

#include "util/json_alloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int (*run)(struct client *c, int argc, char **argv);
} verbs[] = {
    {"run", client_cmd_run},	     {"sessions", client_cmd_sessions},
    {"show", client_cmd_show},	     {"logs", client_cmd_logs},
    {"send", client_cmd_send},	     {"cancel", client_cmd_cancel},
    {"repo", client_cmd_repo},	     {"snapshots", client_cmd_snapshots},
    {"token", client_cmd_token},     {"diff", client_cmd_diff},
    {"approve", client_cmd_approve}, {"reject", client_cmd_reject},
    {"stats", client_cmd_stats},     {"secret", client_cmd_secret},
    {"eval", client_cmd_eval},
};

static void usage(FILE *out)
{
	fputs("usage: warren <command> [options]\n"
	      "\n"
	      "control plane commands (they talk to `warren serve`):\n"
	      "  run --repo R [--follow] \"PROMPT\"   start a session\n"
	      "  sessions [--state S]              list sessions\n"
	      "  show ID                           one session\n"
	      "  logs ID [-f]                      a session's output\n"
	      "  send ID \"TEXT\"                    a follow-up message\n"
	      "  cancel ID                         stop a session\n"
	      "  diff ID [--stat]                  a session's change\n"
	      "  approve ID                        push a reviewed change\n"
	      "  reject ID [--reason TEXT]         drop a reviewed change\n"
	      "  repo add|ls|refresh               repositories\n"
	      "  snapshots [--repo R]              snapshots\n"
	      "  token create|ls|revoke            API tokens\n"
	      "  secret set|ls|rm                  secrets for snapshot "
	      "builds\n"
	      "  stats                             the server's numbers\n"
	      "  eval run SUITE | report RUN       a pilot over frozen "
	      "tasks\n"
	      "\n"
	      "options of all: --server URL  --token T  --json  --help\n"
	      "See `warren COMMAND --help` and docs/cli.md.\n",
	      out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CLIENT_EXIT_USAGE;
	}
	int (*run)(struct client *, int, char **) = NULL;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(argv[1], verbs[i].name))
			run = verbs[i].run;
	if (!run) {
		if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
			usage(stdout);
			return CLIENT_EXIT_OK;
		}
		fprintf(stderr, "warren: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return CLIENT_EXIT_USAGE;
	}

	/* JSON documents come from the server: their memory goes through the
	 * same wrapper as ours, so allocation-failure tests reach them. */
	wr_json_alloc_init();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "warren %s: cannot initialise libcurl\n",
			argv[1]);
		return CLIENT_EXIT_FAILED;
	}
	struct client c = {.verb = argv[1]};
	int code = run(&c, argc - 1, argv + 1);
	client_clear(&c);
	curl_global_cleanup();

	/* A full disk or a closed pipe must not look like success. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "warren %s: writing output: %s\n",
				argv[1], strerror(errno));
		if (code == CLIENT_EXIT_OK)
			code = CLIENT_EXIT_FAILED;
	}
	return code;
}
