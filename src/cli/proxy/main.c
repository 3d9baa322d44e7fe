/* warren-egress - the egress proxy of one snapshot build.
 *
 *   warren-egress --dir DIR [--config FILE] [--ready-fd N] [--allow HOST]...
 *
 * A build sandbox has network none, like a session's; a spec that names
 * hosts for its build (customizations.warren.egress and buildEgress) gets
 * the same proxy a session gets from warren serve (security/egress.h),
 * run by `warren snapshot build` for the length of the build: it listens
 * at DIR/proxy.sock (bound into the build's sandboxes, where warren-relay
 * offers it at 127.0.0.1:3128), allows exactly the --allow hosts, under
 * the server's deny rules (FILE: the server configuration's "egress"
 * object, plus "self": "ADDR:PORT" of the control plane, which no build
 * reaches; without FILE, the defaults: no private, loopback, link-local or
 * metadata address). Each decision is one line on stdout ("egress: "
 * and its JSON: host, port, address, bytes, duration, or the reason of a
 * denial), which the build keeps in its log.
 *
 * "ready" goes to fd N once the socket listens. It stops on SIGTERM or
 * SIGINT, or when its parent dies, and removes DIR.
 *
 * A program of its own, and not part of the static `warren`, for the
 * reason the server links the proxy and `warren` does not: threads,
 * sockets and name resolution (getaddrinfo needs glibc's shared NSS
 * modules) have no place on the sandbox's start path. */
#include "security/egress.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json_alloc.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_FAIL 1
#define ALLOW_MAX 512

static const char usage_text[] =
    "usage: warren-egress --dir DIR [--config FILE] [--ready-fd N] "
    "[--allow HOST]...\n"
    "\n"
    "The egress proxy of one snapshot build (run by `warren snapshot "
    "build`).\n";

struct allowlist {
	char *hosts[ALLOW_MAX];
	size_t n;
};

static int policy(void *ctx, const char *session_id, char ***allow, size_t *n)
{
	(void)session_id;
	const struct allowlist *al = ctx;
	char **v = wr_calloc(al->n + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < al->n; i++) {
		v[i] = wr_strdup(al->hosts[i]);
		if (!v[i]) {
			egress_strv_free(v, i);
			return -ENOMEM;
		}
	}
	*allow = v;
	*n = al->n;
	return 0;
}

static void audit(void *ctx, const char *session_id, const json_t *details)
{
	(void)ctx;
	(void)session_id;
	char *text = json_dumps(details, JSON_COMPACT);
	if (!text)
		return;
	/* one write per line: the log is shared with nobody, but whole lines
	 * survive a kill */
	char *line = wr_asprintf("egress: %s\n", text);
	free(text);
	if (line) {
		if (write(STDOUT_FILENO, line, strlen(line)) < 0) {
			/* the build's log is gone; nothing to tell */
		}
		free(line);
	}
}

/* FILE: the rules object, with "self" taken out into *self. */
static int load_config(const char *path, json_t **rules, char **self_addr,
		       uint16_t *self_port, struct wr_error **err)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return wr_error_input(err, EINVAL, "%s:%d:%d: %s", path,
				      jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return wr_error_input(err, EINVAL, "%s: expected a JSON object",
				      path);
	}
	json_t *self = json_object_get(root, "self");
	if (self) {
		const char *text = json_string_value(self);
		const char *colon = text ? strrchr(text, ':') : NULL;
		uint64_t port;
		if (!colon || colon == text ||
		    wr_parse_uint(colon + 1, 1, 65535, &port) < 0) {
			json_decref(root);
			return wr_error_input(err, EINVAL,
					      "%s: self: expected "
					      "\"ADDR:PORT\"",
					      path);
		}
		*self_addr = wr_strndup(text, (size_t)(colon - text));
		*self_port = (uint16_t)port;
		json_object_del(root, "self");
	}
	*rules = root;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"config", required_argument, NULL, 'c'},
	    {"ready-fd", required_argument, NULL, 'r'},
	    {"allow", required_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *dir = NULL, *config = NULL;
	int ready_fd = -1;
	struct allowlist al = {0};
	int ch;
	wr_json_alloc_init(); /* before any JSON: the configuration */
	while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		uint64_t n;
		struct egress_allow e;
		const char *why;
		switch (ch) {
		case 'd': dir = optarg; break;
		case 'c': config = optarg; break;
		case 'r':
			if (wr_parse_uint(optarg, 0, 1024, &n) < 0) {
				fprintf(stderr,
					"warren-egress: --ready-fd: not a "
					"descriptor: %s\n",
					optarg);
				return EXIT_USAGE;
			}
			ready_fd = (int)n;
			break;
		case 'a':
			if (egress_allow_check(optarg, &e, &why) < 0) {
				fprintf(stderr,
					"warren-egress: --allow '%.300s': %s\n",
					optarg, why);
				return EXIT_USAGE;
			}
			if (al.n == ALLOW_MAX) {
				fprintf(stderr,
					"warren-egress: more than %d hosts\n",
					ALLOW_MAX);
				return EXIT_USAGE;
			}
			al.hosts[al.n++] = optarg;
			break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: fputs(usage_text, stderr); return EXIT_USAGE;
		}
	}
	if (!dir || optind < argc) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	/* gone with the build that started it, whatever kills it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return EXIT_FAIL;
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* before any thread starts, so that every thread blocks them */
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct wr_error *err = NULL;
	json_t *rules = NULL;
	char *self_addr = NULL;
	uint16_t self_port = 0;
	struct egress *eg = NULL;
	int code = EXIT_FAIL;
	if (config &&
	    load_config(config, &rules, &self_addr, &self_port, &err) < 0)
		goto out;
	struct egress_config cfg = {
	    .rules = rules,
	    .self_addr = self_addr,
	    .self_port = self_port,
	    .policy = policy,
	    .audit = audit,
	    .ctx = &al,
	};
	if (egress_start(&cfg, &eg, &err) < 0)
		goto out;
	if (egress_session_open(eg, "build", dir, NULL, &err) < 0)
		goto out;
	if (ready_fd >= 0) {
		if (write(ready_fd, "ready\n", 6) != 6) {
			wr_error_set(&err, errno, "--ready-fd %d", ready_fd);
			goto out;
		}
		close(ready_fd);
	}
	int sig;
	while (sigwait(&sigs, &sig) != 0)
		;
	code = 0;
out:
	if (err)
		fprintf(stderr, "warren-egress: %s\n",
			err->msg ? err->msg : "failed");
	if (eg) {
		egress_session_close(eg, "build");
		egress_stop(eg);
	}
	json_decref(rules);
	free(self_addr);
	wr_error_free(err);
	return code;
}
