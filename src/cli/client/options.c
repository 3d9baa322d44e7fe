/* options.c - what every client verb shares: the option table (--server,
 * --token, --json, --help) merged into each verb's own, usage errors, and
 * the one place errors are printed and turned into exit codes. */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_SERVER = 0x2000, /* above any verb's own option values */
	OPT_TOKEN,
	OPT_JSON,
};

static const struct option common_options[] = {
    {"server", required_argument, NULL, OPT_SERVER},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
};

void client_usage_error(struct client *c, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "warren %s: ", c->verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'warren %s --help'.\n", c->verb);
}

/* The verb's options followed by the shared ones, NULL-terminated. */
static struct option *merge_options(const struct option *own)
{
	size_t n_own = 0;
	while (own && own[n_own].name)
		n_own++;
	size_t n = n_own + ARRAY_SIZE(common_options);
	struct option *all = wr_calloc(n + 1, sizeof(*all));
	if (!all)
		return NULL;
	if (n_own)
		memcpy(all, own, n_own * sizeof(*all));
	memcpy(all + n_own, common_options, sizeof(common_options));
	return all;
}

int client_parse(struct client *c, const struct client_verb *v, void *ctx,
		 int argc, char **argv)
{
	c->verb = v->name;
	_cleanup_free_ struct option *options = merge_options(v->options);
	/* ":" first: a missing value is reported as ':', not '?' */
	_cleanup_free_ char *shortopts =
	    wr_asprintf(":%sh", v->shortopts ? v->shortopts : "");
	if (!options || !shortopts) {
		fprintf(stderr, "warren %s: out of memory\n", c->verb);
		return CLIENT_EXIT_FAILED;
	}

	/* GNU getopt permutes: options may follow the positional arguments
	 * ("warren show ID --json"); "--" ends the options. */
	optind = 0; /* glibc: 0 also resets the permutation state */
	opterr = 0;
	int opt;
	while ((opt = getopt_long(argc, argv, shortopts, options, NULL)) !=
	       -1) {
		switch (opt) {
		case OPT_SERVER: c->server_opt = optarg; break;
		case OPT_TOKEN: c->token_opt = optarg; break;
		case OPT_JSON: c->json = true; break;
		case 'h': fputs(v->usage, stdout); return CLIENT_EXIT_OK;
		case ':':
			client_usage_error(c, "option '%s' needs a value",
					   argv[optind - 1]);
			return CLIENT_EXIT_USAGE;
		case '?':
			if (optopt && optopt < 0x100)
				client_usage_error(c, "unknown option '-%c'",
						   optopt);
			else
				client_usage_error(c, "unknown option '%s'",
						   argv[optind - 1]);
			return CLIENT_EXIT_USAGE;
		default:
			if (!v->on_option ||
			    v->on_option(c, ctx, opt, optarg) < 0)
				return CLIENT_EXIT_USAGE;
		}
	}
	c->args = argv + optind;
	c->n_args = argc - optind;
	return CLIENT_CONTINUE;
}

int client_check_args(struct client *c, int min, int max, const char *what)
{
	if (c->n_args < min) {
		client_usage_error(c, "missing %s", what);
		return CLIENT_EXIT_USAGE;
	}
	if (max >= 0 && c->n_args > max) {
		client_usage_error(c, "unexpected argument '%s'", c->args[max]);
		return CLIENT_EXIT_USAGE;
	}
	return CLIENT_CONTINUE;
}

int client_exit(struct client *c, int ret, struct wr_error *err)
{
	int code;
	if (ret == -EHOSTUNREACH || ret == -ECONNRESET)
		code = CLIENT_EXIT_UNREACHABLE;
	else if (err && err->bad_input)
		code = CLIENT_EXIT_USAGE;
	else
		code = CLIENT_EXIT_FAILED;
	/* a reader that went away (`| head`) needs no message */
	if (ret != -EPIPE)
		fprintf(stderr, "warren %s: %s\n", c->verb,
			err && err->msg ? err->msg : strerror(-ret));
	wr_error_free(err);
	return code;
}

void client_clear(struct client *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
	free(c->server);
	c->server = NULL;
	if (c->token) /* a credential: do not leave it in freed memory */
		explicit_bzero(c->token, strlen(c->token));
	free(c->token);
	c->token = NULL;
	free(c->token_file);
	c->token_file = NULL;
}
