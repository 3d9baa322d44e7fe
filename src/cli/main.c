/* main.c - `warren`: dispatch to a verb. */
#include "cli/cli.h"

#include "util/fs.h"
#include "util/json_alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef WARREN_VERSION
#define WARREN_VERSION "0.1.0"
#endif

/* The control-plane verbs live in their own executables next to this one
 * (they link libmicrohttpd, SQLite, libcurl: ARCHITECTURE.md, "Keep the
 * sandbox path lean"), the way git reaches its sub-commands. */
/* audit reads the store: warren-serve links it */
static const char *const server_verbs[] = {"serve", "audit", NULL};
static const char *const client_verbs[] = {
    "run",    "sessions", "show",   "logs",   "send",
    "cancel", "repo",	  "token",  "secret", "snapshots",
    "diff",   "approve",  "reject", "stats",  "eval", NULL};

static bool verb_in(const char *verb, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(verb, list[i]))
			return true;
	return false;
}

static int exec_helper(const char *helper, char **argv)
{
	char *dir = wr_self_dir();
	char path[4096];
	if (!dir || snprintf(path, sizeof(path), "%s/%s", dir, helper) >=
			(int)sizeof(path)) {
		free(dir);
		fprintf(stderr, "warren: cannot find %s\n", helper);
		return WR_EXIT_FAILURE;
	}
	free(dir);
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr, "warren: exec %s: %s\n", path, strerror(errno));
	return WR_EXIT_FAILURE;
}

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
	    "  sandbox ls [--all] [--json]              list its data directory's "
	    "sandboxes\n"
	    "  sandbox rm NAME...                       remove sandboxes\n"
	    "  snapshot build REPO [--ref REF]          prepare a repository's "
	    "environment\n"
	    "  snapshot refresh REPO [--max-age D]      rebuild when the ref moved\n"
	    "  snapshot list|show|rm|gc|verify          manage snapshots\n"
	    "  snapshot push|pull ID --blobs FILE       to and from an OCI "
	    "registry\n"
	    "  serve [--data DIR] [--listen ADDR:PORT]  run the control plane\n"
	    "  run --repo R [--follow] \"PROMPT\"         start a session\n"
	    "  sessions | show ID | logs ID [-f]        look at sessions\n"
	    "  send ID \"TEXT\" | cancel ID               follow up, cancel\n"
	    "  diff ID | approve ID | reject ID         review a change\n"
	    "  repo add|ls|refresh                      manage repositories\n"
	    "  token create|ls|revoke                   API tokens (admin)\n"
	    "  secret set|ls|rm                         secrets for snapshot "
	    "builds (admin)\n"
	    "  stats                                    the server's numbers\n"
	    "  audit verify|export ID [--data DIR]      check or export a "
	    "session's audit log\n"
	    "  version                                  print the version\n"
	    "\n"
	    "See `warren sandbox --help` and docs/ for details.\n");
}

/* gc with --blobs, --dry-run, --keep, --store or --config is
 * warren-registry's */
static bool gc_needs_registry(int argc, char **argv)
{
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--blobs") ||
		    !strncmp(argv[i], "--blobs=", 8) ||
		    !strcmp(argv[i], "--dry-run") ||
		    !strcmp(argv[i], "--keep") ||
		    !strncmp(argv[i], "--keep=", 7) ||
		    !strcmp(argv[i], "--store") ||
		    !strncmp(argv[i], "--store=", 8) ||
		    !strcmp(argv[i], "--config") ||
		    !strncmp(argv[i], "--config=", 9))
			return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	wr_json_alloc_init(); /* specs, manifests, --json output */
	if (argc < 2) {
		usage(stderr);
		return WR_EXIT_USAGE;
	}
	const char *verb = argv[1];
	if (verb_in(verb, server_verbs))
		return exec_helper("warren-serve", argv);
	if (verb_in(verb, client_verbs))
		return exec_helper("warren-client", argv);
	if (!strcmp(verb, "sandbox"))
		return cmd_sandbox(argc - 1, argv + 1);
	/* push and pull link libcurl and libarchive: their own executable;
	 * so does gc of a registry (--blobs), and gc's --dry-run */
	if (!strcmp(verb, "snapshot") && argc > 2 &&
	    (!strcmp(argv[2], "push") || !strcmp(argv[2], "pull") ||
	     (!strcmp(argv[2], "gc") && gc_needs_registry(argc, argv))))
		return exec_helper("warren-registry", argv);
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
