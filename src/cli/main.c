/* main.c - `warren`: dispatch to a verb. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#ifndef WARREN_VERSION
#define WARREN_VERSION "0.1.0"
#endif

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: warren <command> [args]\n"
	    "\n"
	    "commands:\n"
	    "  sandbox run [options] -- CMD [ARGS...]   run CMD in a new "
	    "sandbox\n"
	    "  sandbox create --name NAME [options]     start a long-lived "
	    "sandbox\n"
	    "  sandbox exec NAME [opts] -- CMD...       run CMD in a sandbox\n"
	    "  sandbox ls [--json]                      list sandboxes\n"
	    "  sandbox rm NAME...                       remove sandboxes\n"
	    "  snapshot build REPO [--ref REF]          prepare a repository's environment\n"
	    "  snapshot list|show|rm|gc|verify          manage snapshots\n"
	    "  version                                  print the version\n"
	    "\n"
	    "See `warren sandbox --help` and docs/ for details.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return WR_EXIT_USAGE;
	}
	const char *verb = argv[1];
	if (!strcmp(verb, "sandbox"))
		return cmd_sandbox(argc - 1, argv + 1);
	if (!strcmp(verb, "snapshot"))
		return cmd_snapshot(argc - 1, argv + 1);
	if (!strcmp(verb, "version") || !strcmp(verb, "--version")) {
		printf("warren %s\n", WARREN_VERSION);
		return 0;
	}
	if (!strcmp(verb, "help") || !strcmp(verb, "--help") ||
	    !strcmp(verb, "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "warren: unknown command '%s'\n", verb);
	usage(stderr);
	return WR_EXIT_USAGE;
}
