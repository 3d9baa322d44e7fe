/* agents_layer_build - a test hook: agents_layer_ensure from the command
 * line, for tests/integration/agents_layer.sh.
 *
 *   agents_layer_build --data DIR --warren BIN --registry URL
 *                      [--egress-config FILE] [--timeout-ms N] SPEC...
 *
 * Options stop at the first SPEC (a spec is never taken for one).
 * Prints the layer's path on stdout; on failure the error on stderr and
 * exit 1 (2 for a refused spec or registry). */
#include "agents/layer.h"
#include "util/json_alloc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	struct agents_layer_req req = {0};
	static const struct option opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"warren", required_argument, NULL, 'w'},
	    {"registry", required_argument, NULL, 'r'},
	    {"egress-config", required_argument, NULL, 'e'},
	    {"timeout-ms", required_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			req.data_dir = optarg;
			break;
		case 'w':
			req.warren_bin = optarg;
			break;
		case 'r':
			req.registry = optarg;
			break;
		case 'e':
			req.egress_config = optarg;
			break;
		case 't':
			req.timeout_ms = strtoull(optarg, NULL, 10);
			break;
		default:
			return 2;
		}
	}
	wr_json_alloc_init();
	req.packages = (const char *const *)argv + optind;
	req.n_packages = (size_t)(argc - optind);
	char *path = NULL;
	struct wr_error *err = NULL;
	int r = agents_layer_ensure(&req, &path, &err);
	if (r < 0) {
		fprintf(stderr, "agents_layer_build: %s\n",
			err && err->msg ? err->msg : "failed");
		int code = err && err->bad_input ? 2 : 1;
		wr_error_free(err);
		return code;
	}
	printf("%s\n", path);
	free(path);
	return 0;
}
