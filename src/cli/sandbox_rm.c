/* sandbox_rm.c - `warren sandbox rm NAME...`: kill everything inside,
 * unmount, remove the cgroup; nothing left behind. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>

int cmd_sandbox_rm(int argc, char **argv)
{
	if (argc < 2) {
		cli_usage_error("rm", "usage: warren sandbox rm NAME...");
		return WR_EXIT_USAGE;
	}
	int ret = 0;
	for (int i = 1; i < argc; i++) {
		struct wr_error *err = NULL;
		int r = sandbox_remove(argv[i], &err);
		if (r < 0) {
			cli_error("rm", err);
			wr_error_free(err);
			int code =
			    r == -ENOENT || r == -EINVAL ? 1 : WR_EXIT_FAILURE;
			if (code > ret)
				ret = code;
		}
	}
	return ret;
}
