/* sandbox_exec.c - `warren sandbox exec NAME [--cwd DIR] [--env K=V]...
 * [--tty] -- CMD [ARGS...]`. */
#include "cli/cli.h"

#include "sandbox/request.h"

#include "util/alloc.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_sandbox_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {SBX_OPT_CWD, required_argument, NULL, 'c'},
	    {SBX_OPT_ENV, required_argument, NULL, 'e'},
	    {"tty", no_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *cwd = NULL;
	bool tty = false;
	size_t n_env = 0;
	char **env = wr_calloc((size_t)argc + 8, sizeof(char *));
	if (!env)
		return WR_EXIT_FAILURE;
	int ret = 0;
	/* NAME may come before or after the options (but before "--") */
	const char *name = NULL;
	optind = 1;
	opterr = 0;
	int c;
	for (;;) {
		c = getopt_long(argc, argv, "+:h", opts, NULL);
		if (c == -1) {
			/* a non-option: the name, unless we passed "--" */
			if (!name && optind < argc &&
			    strcmp(argv[optind - 1], "--") != 0) {
				name = argv[optind++];
				continue;
			}
			break;
		}
		switch (c) {
		case 'c':
			if (optarg[0] != '/') {
				cli_usage_error("exec",
						"--cwd '%s': must be absolute",
						optarg);
				ret = WR_EXIT_USAGE;
				goto out;
			}
			cwd = optarg;
			break;
		case 'e': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				cli_usage_error(
				    "exec", "--env '%s': expected K=V", optarg);
				ret = WR_EXIT_USAGE;
				goto out;
			}
			size_t klen = (size_t)(eq - optarg), j;
			for (j = 0; j < n_env; j++) {
				if (!strncmp(env[j], optarg, klen + 1))
					break;
			}
			env[j] = optarg;
			if (j == n_env)
				n_env++;
			break;
		}
		case 't': tty = true; break;
		case 'h':
			printf("usage: warren sandbox exec NAME [--cwd DIR] "
			       "[--env K=V]... [--tty] -- CMD [ARGS...]\n");
			goto out;
		case ':':
			cli_usage_error("exec", "option '%s' needs a value",
					argv[optind - 1]);
			ret = WR_EXIT_USAGE;
			goto out;
		default:
			cli_usage_error("exec", "unknown option '%s'",
					argv[optind - 1]);
			ret = WR_EXIT_USAGE;
			goto out;
		}
	}
	if (!name) {
		cli_usage_error("exec",
				"usage: warren sandbox exec NAME [--cwd DIR] "
				"[--env K=V]... [--tty] -- CMD [ARGS...]");
		ret = WR_EXIT_USAGE;
		goto out;
	}
	if (optind >= argc) {
		cli_usage_error("exec",
				"no command given (use -- CMD [ARGS...])");
		ret = WR_EXIT_USAGE;
		goto out;
	}
	if (tty) {
		const char *term = getenv("TERM");
		static char term_kv[128];
		snprintf(term_kv, sizeof(term_kv), "TERM=%s",
			 term && *term ? term : "xterm");
		env[n_env++] = term_kv;
	}
	env[n_env] = NULL;
	struct sandbox_exec_request req = {
	    .argv = argv + optind,
	    .env = env,
	    .cwd = cwd,
	    .tty = tty,
	    .stdio = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO},
	};
	struct wr_error *err = NULL;
	int code = sandbox_exec(name, &req, &err);
	if (err) {
		cli_error("exec", err);
		wr_error_free(err);
	}
	if (code < 0)
		ret = code == -ENOENT || code == -EINVAL ? WR_EXIT_USAGE
							 : WR_EXIT_FAILURE;
	else
		ret = code;
out:
	free(env);
	return ret;
}
