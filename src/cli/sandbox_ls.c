/* sandbox_ls.c - `warren sandbox ls [--all | --data DIR] [--json]`. Cleans
 * up after crashed sandboxes first (any warren's: a dead one is nobody's),
 * so what it shows is what exists; then shows the sandboxes of its own data
 * directory, the ones this warren (and a `warren serve` on that directory)
 * made, or with --all every Warren sandbox on the host. */
#include "cli/cli.h"

#include "util/cleanup.h"

#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

int cmd_sandbox_ls(int argc, char **argv)
{
	bool json = false, all = false;
	const char *data = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--all")) {
			all = true;
		} else if (!strcmp(argv[i], "--data")) {
			if (++i == argc) {
				cli_usage_error("ls", "option '--data' needs a "
						      "value");
				return WR_EXIT_USAGE;
			}
			data = argv[i];
		} else {
			cli_usage_error("ls", "unknown argument '%s'", argv[i]);
			return WR_EXIT_USAGE;
		}
	}
	if (all && data) {
		cli_usage_error("ls", "--all and --data exclude each other");
		return WR_EXIT_USAGE;
	}
	_cleanup_free_ char *own = all ? NULL : cli_data_dir(data);
	if (!all && !own) {
		fprintf(stderr, "warren sandbox ls: out of memory\n");
		return WR_EXIT_FAILURE;
	}
	struct wr_error *err = NULL;
	int cleaned = sandbox_reap_stale(&err);
	if (cleaned < 0) {
		cli_error("ls", err);
		wr_error_free(err);
		err = NULL;
	} else if (cleaned > 0 && !json) {
		fprintf(stderr,
			"warren sandbox ls: cleaned up %d stale sandbox%s\n",
			cleaned, cleaned == 1 ? "" : "es");
	}
	struct sandbox_info *infos;
	size_t n;
	if (sandbox_list(&infos, &n, &err) < 0) {
		cli_error("ls", err);
		wr_error_free(err);
		return WR_EXIT_FAILURE;
	}
	/* ours first, the others moved past `shown` (still freed with the
	 * array); a record without a data directory (an older warren's)
	 * belongs to none */
	size_t shown = 0;
	for (size_t i = 0; i < n; i++) {
		if (!all && (!infos[i].data_dir || strcmp(infos[i].data_dir, own)))
			continue;
		struct sandbox_info keep = infos[i];
		infos[i] = infos[shown];
		infos[shown++] = keep;
	}
	struct timeval tv;
	gettimeofday(&tv, NULL);
	int64_t now_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < shown; i++) {
			json_t *o = json_pack(
			    "{s:s, s:i, s:i, s:I, s:I, s:s, s:I}", "name",
			    infos[i].name, "init_pid", (int)infos[i].init_pid,
			    "slot", infos[i].slot, "host_uid_base",
			    (json_int_t)infos[i].host_uid_base, "created_ms",
			    (json_int_t)infos[i].created_ms, "state",
			    infos[i].alive ? "running" : "stopped",
			    "deadline_ms", (json_int_t)infos[i].deadline_ms);
			if (o && infos[i].upper)
				json_object_set_new(
				    o, "upper", json_string(infos[i].upper));
			if (o && infos[i].data_dir)
				json_object_set_new(
				    o, "data_dir", json_string(infos[i].data_dir));
			if (o)
				json_object_set_new(
				    o, "backend",
				    json_string(
					sandbox_backend_name(infos[i].backend)));
			json_array_append_new(arr, o);
		}
		char *text = json_dumps(arr, JSON_INDENT(2));
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(arr);
	} else {
		printf("%-24s %-8s %-8s %-6s %-12s %-8s %s%s\n", "NAME", "STATE",
		       "PID", "SLOT", "AGE", "BACKEND", "UPPER",
		       all ? " DATA" : "");
		for (size_t i = 0; i < shown; i++) {
			char age[32];
			int64_t s = (now_ms - infos[i].created_ms) / 1000;
			if (s < 120)
				snprintf(age, sizeof(age), "%llds",
					 (long long)s);
			else if (s < 7200)
				snprintf(age, sizeof(age), "%lldm",
					 (long long)s / 60);
			else
				snprintf(age, sizeof(age), "%lldh",
					 (long long)s / 3600);
			printf("%-24s %-8s %-8d %-6d %-12s %-8s %s", infos[i].name,
			       infos[i].alive ? "running" : "stopped",
			       (int)infos[i].init_pid, infos[i].slot, age,
			       sandbox_backend_name(infos[i].backend),
			       infos[i].upper ? infos[i].upper : "-");
			if (all)
				printf(" %s", infos[i].data_dir
						  ? infos[i].data_dir
						  : "-");
			putchar('\n');
		}
	}
	sandbox_info_free_array(infos, n);
	return 0;
}
