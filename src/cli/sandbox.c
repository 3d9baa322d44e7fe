/* sandbox.c - `warren sandbox ...`: sub-verb dispatch and shared options. */
#include "cli/cli.h"

#include "sandbox/request.h"

#include "snapshot/build.h"
#include "snapshot/script.h"
#include "snapshot/session.h"
#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static const char sandbox_usage[] =
    "usage: warren sandbox run [options] -- CMD [ARGS...]\n"
    "       warren sandbox create --name NAME [options]\n"
    "       warren sandbox exec NAME [--cwd DIR] [--env K=V]... [--tty] -- CMD "
    "[ARGS...]\n"
    "       warren sandbox ls [--all | --data DIR] [--json]\n"
    "       warren sandbox rm NAME...\n"
    "\n"
    "options for run and create:\n"
    "  --rootfs DIR          root image (default: host mode, the host's /usr "
    "read-only)\n"
    "  --layer DIR           read-only lower layer, repeatable, last on top\n"
    "  --upper DIR           writable layer kept after exit (default: "
    "scratch)\n"
    "  --bind SRC:DST[:ro]   bind a host path inside\n"
    "  --env K=V             environment variable, repeatable\n"
    "  --cwd DIR             working directory inside (default /workspace)\n"
    "  --hostname NAME       hostname inside\n"
    "  --memory SIZE         memory limit (default 4G)\n"
    "  --cpus N              CPU limit, fractional allowed (default: none)\n"
    "  --pids N              process limit (default 4096)\n"
    "  --disk SIZE           size cap of the writable layer (default 10G for\n"
    "                        the scratch layer); with --upper DIR the layer\n"
    "                        is an ext4 image DIR/layer.img of SIZE\n"
    "  --inodes N            with --upper and --disk: files the image holds\n"
    "                        (default: one per 16 KiB)\n"
    "  --timeout DURATION    wall-clock limit: 90s, 5m, 1h30m (default: none)\n"
    "  --net none            network: loopback only (the only mode for now)\n"
    "  --backend NAME        native (namespaces, seccomp) or gvisor (the same\n"
    "                        sandbox under gVisor's runsc); default:\n"
    "                        $WARREN_SANDBOX_BACKEND, else native\n"
    "  --allow-userns        let the sandbox create user namespaces\n"
    "  --snapshot ID         start from a snapshot's layers (below any "
    "--layer)\n"
    "  --ref REF             with --snapshot: bring the workspace to REF\n"
    "                        (fetch + checkout from the repository's mirror)\n"
    "  --data DIR            data directory holding snapshots, and the one\n"
    "                        the sandbox is listed under by ls (default\n"
    "                        $WARREN_HOME, else ./.warren)\n"
    "  --json                print a machine-readable result\n"
    "  --die-with-parent     SIGTERM (the sandbox torn down) when the process\n"
    "                        that started this warren dies\n"
    "\n"
    "ls lists the sandboxes of its data directory (--data, else the default\n"
    "above); --all lists every Warren sandbox on the host.\n";

void cli_error(const char *verb, struct wr_error *err)
{
	fprintf(stderr, "warren sandbox %s: %s\n", verb,
		err && err->msg ? err->msg : "failed");
}

void cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "warren sandbox %s: ", verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'warren sandbox --help'.\n");
}

enum {
	OPT_ROOTFS = 1000,
	OPT_LAYER,
	OPT_UPPER,
	OPT_BIND,
	OPT_ENV,
	OPT_CWD,
	OPT_HOSTNAME,
	OPT_MEMORY,
	OPT_CPUS,
	OPT_PIDS,
	OPT_DISK,
	OPT_INODES,
	OPT_TIMEOUT,
	OPT_NET,
	OPT_JSON,
	OPT_NAME,
	OPT_ALLOW_USERNS,
	OPT_SNAPSHOT,
	OPT_DATA,
	OPT_REF,
	OPT_DIE_WITH_PARENT,
	OPT_BACKEND,
};

/* the names are request.h's: the server's command lines use the same */
static const struct option sandbox_options[] = {
    {SBX_OPT_ROOTFS, required_argument, NULL, OPT_ROOTFS},
    {SBX_OPT_LAYER, required_argument, NULL, OPT_LAYER},
    {SBX_OPT_UPPER, required_argument, NULL, OPT_UPPER},
    {SBX_OPT_BIND, required_argument, NULL, OPT_BIND},
    {SBX_OPT_ENV, required_argument, NULL, OPT_ENV},
    {SBX_OPT_CWD, required_argument, NULL, OPT_CWD},
    {SBX_OPT_HOSTNAME, required_argument, NULL, OPT_HOSTNAME},
    {SBX_OPT_MEMORY, required_argument, NULL, OPT_MEMORY},
    {SBX_OPT_CPUS, required_argument, NULL, OPT_CPUS},
    {SBX_OPT_PIDS, required_argument, NULL, OPT_PIDS},
    {SBX_OPT_DISK, required_argument, NULL, OPT_DISK},
    {SBX_OPT_INODES, required_argument, NULL, OPT_INODES},
    {SBX_OPT_TIMEOUT, required_argument, NULL, OPT_TIMEOUT},
    {SBX_OPT_NET, required_argument, NULL, OPT_NET},
    {SBX_OPT_JSON, no_argument, NULL, OPT_JSON},
    {SBX_OPT_NAME, required_argument, NULL, OPT_NAME},
    {SBX_OPT_ALLOW_USERNS, no_argument, NULL, OPT_ALLOW_USERNS},
    {SBX_OPT_SNAPSHOT, required_argument, NULL, OPT_SNAPSHOT},
    {SBX_OPT_DATA, required_argument, NULL, OPT_DATA},
    {SBX_OPT_REF, required_argument, NULL, OPT_REF},
    {SBX_OPT_DIE_WITH_PARENT, no_argument, NULL, OPT_DIE_WITH_PARENT},
    {SBX_OPT_BACKEND, required_argument, NULL, OPT_BACKEND},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int push(void **array, size_t *n, size_t elem, const void *value)
{
	void *grown = wr_realloc(*array, (*n + 1) * elem);
	if (!grown)
		return -ENOMEM;
	memcpy((char *)grown + *n * elem, value, elem);
	*array = grown;
	(*n)++;
	return 0;
}

static int parse_bind(char *spec, struct sandbox_bind *b)
{
	/* SRC:DST[:ro] (":rw" accepted for symmetry) */
	char *first = strchr(spec, ':');
	if (!first || first == spec || first[1] == '\0')
		return -EINVAL;
	*first = '\0';
	char *dst = first + 1;
	char *mode = strrchr(dst, ':');
	b->read_only = false;
	if (mode) {
		if (!strcmp(mode, ":ro"))
			b->read_only = true;
		else if (strcmp(mode, ":rw"))
			return -EINVAL;
		*mode = '\0';
	}
	b->source = spec;
	b->dest = dst;
	return dst[0] ? 0 : -EINVAL;
}

int cli_parse_sandbox_opts(int argc, char **argv, struct cli_sandbox_opts *o,
			   bool allow_name)
{
	const char *verb = argv[0];
	memset(o, 0, sizeof(*o));
	/* the default backend: WARREN_SANDBOX_BACKEND, else native */
	const char *env_backend = getenv("WARREN_SANDBOX_BACKEND");
	if (env_backend && *env_backend &&
	    sandbox_backend_parse(env_backend, &o->cfg.backend) < 0) {
		cli_usage_error(verb,
				"WARREN_SANDBOX_BACKEND='%s': expected native "
				"or gvisor",
				env_backend);
		return -1;
	}
	optind = 1;
	opterr = 0;
	int c;
	/* "+": stop at the first non-option, the command is not ours */
	while ((c = getopt_long(argc, argv, "+:h", sandbox_options, NULL)) !=
	       -1) {
		int r = 0;
		uint64_t v;
		switch (c) {
		case OPT_ROOTFS:
			if (o->cfg.rootfs) {
				cli_usage_error(verb, "--rootfs given twice");
				return -1;
			}
			o->cfg.rootfs = optarg;
			break;
		case OPT_LAYER:
			r = push((void **)&o->cfg.layers, &o->cfg.n_layers,
				 sizeof(char *), &optarg);
			break;
		case OPT_UPPER:
			if (o->cfg.upper) {
				cli_usage_error(verb, "--upper given twice");
				return -1;
			}
			o->cfg.upper = optarg;
			break;
		case OPT_BIND: {
			struct sandbox_bind b;
			if (parse_bind(optarg, &b) < 0) {
				cli_usage_error(
				    verb, "--bind '%s': expected SRC:DST[:ro]",
				    optarg);
				return -1;
			}
			r = push((void **)&o->cfg.binds, &o->cfg.n_binds,
				 sizeof(b), &b);
			break;
		}
		case OPT_ENV:
			if (!strchr(optarg, '=') || optarg[0] == '=') {
				cli_usage_error(
				    verb, "--env '%s': expected K=V", optarg);
				return -1;
			}
			r = push((void **)&o->cfg.env, &o->cfg.n_env,
				 sizeof(char *), &optarg);
			break;
		case OPT_CWD: o->cfg.cwd = optarg; break;
		case OPT_HOSTNAME:
			if (wr_validate_name(optarg) < 0) {
				cli_usage_error(
				    verb, "--hostname '%s': invalid", optarg);
				return -1;
			}
			o->cfg.hostname = optarg;
			break;
		case OPT_MEMORY:
			if (wr_parse_size(optarg, &o->cfg.memory_bytes) < 0 ||
			    o->cfg.memory_bytes == 0) {
				cli_usage_error(
				    verb,
				    "--memory '%s': expected a size "
				    "like 512M or 2G",
				    optarg);
				return -1;
			}
			break;
		case OPT_DISK:
			if (wr_parse_size(optarg, &o->cfg.disk_bytes) < 0 ||
			    o->cfg.disk_bytes == 0) {
				cli_usage_error(verb,
						"--disk '%s': expected a size "
						"like 1G",
						optarg);
				return -1;
			}
			break;
		case OPT_INODES:
			if (wr_parse_uint(optarg, 1, UINT32_MAX, &o->cfg.inodes) <
			    0) {
				cli_usage_error(verb,
						"--inodes '%s': expected a "
						"count like 100000",
						optarg);
				return -1;
			}
			break;
		case OPT_CPUS:
			if (wr_parse_cpus(optarg, &o->cfg.millicpus) < 0) {
				cli_usage_error(
				    verb,
				    "--cpus '%s': expected a number "
				    "like 2 or 0.5",
				    optarg);
				return -1;
			}
			break;
		case OPT_PIDS:
			if (wr_parse_uint(optarg, 1, 4194304, &v) < 0) {
				cli_usage_error(
				    verb,
				    "--pids '%s': expected a number "
				    "from 1 to 4194304",
				    optarg);
				return -1;
			}
			o->cfg.pids = v;
			break;
		case OPT_TIMEOUT:
			if (wr_parse_duration(optarg, &o->cfg.timeout_ms) < 0 ||
			    o->cfg.timeout_ms == 0) {
				cli_usage_error(verb,
						"--timeout '%s': expected a "
						"duration like 90s, 5m, 1h30m",
						optarg);
				return -1;
			}
			break;
		case OPT_BACKEND:
			if (sandbox_backend_parse(optarg, &o->cfg.backend) <
			    0) {
				cli_usage_error(verb,
						"--backend '%s': expected "
						"native or gvisor",
						optarg);
				return -1;
			}
			break;
		case OPT_NET:
			if (strcmp(optarg, "none")) {
				cli_usage_error(verb,
						"--net '%s': only 'none' is "
						"supported",
						optarg);
				return -1;
			}
			o->cfg.net = SANDBOX_NET_NONE;
			break;
		case OPT_JSON: o->json = true; break;
		case OPT_NAME:
			if (!allow_name) {
				cli_usage_error(verb, "--name is for 'create'");
				return -1;
			}
			if (wr_validate_name(optarg) < 0) {
				cli_usage_error(
				    verb,
				    "--name '%s': use 1-63 letters, "
				    "digits, '_', '.', '-'",
				    optarg);
				return -1;
			}
			o->cfg.name = optarg;
			break;
		case OPT_ALLOW_USERNS: o->cfg.allow_userns = true; break;
		case OPT_SNAPSHOT: o->snapshot = optarg; break;
		case OPT_DATA: o->data = optarg; break;
		case OPT_REF: o->ref = optarg; break;
		case OPT_DIE_WITH_PARENT: {
			/* SIGTERM when the process that started this one
			 * dies (a snapshot builder killed with the server):
			 * the sandbox is then torn down as for any SIGTERM;
			 * a parent gone already counts */
			pid_t parent = getppid();
			if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 ||
			    getppid() != parent)
				raise(SIGTERM);
			break;
		}
		case 'h': fputs(sandbox_usage, stdout); exit(0);
		case ':':
			cli_usage_error(verb, "option '%s' needs a value",
					argv[optind - 1]);
			return -1;
		default:
			cli_usage_error(verb, "unknown option '%s'",
					argv[optind - 1]);
			return -1;
		}
		if (r < 0) {
			fprintf(stderr, "warren %s: out of memory\n", verb);
			return -1;
		}
	}
	if (o->cfg.rootfs && o->cfg.hostname == NULL) {
		/* nothing: hostname defaults to "warren" */
	}
	return optind;
}

/* Appends a string cfg will borrow; we keep it alive. */
static const char *own(struct cli_sandbox_opts *o, char *text)
{
	if (!text)
		return NULL;
	char **grown = wr_realloc(o->owned, (o->n_owned + 1) * sizeof(char *));
	if (!grown) {
		free(text);
		return NULL;
	}
	o->owned = grown;
	o->owned[o->n_owned++] = text;
	return text;
}

/* The snapshot's layers go below any --layer; its containerEnv below any
 * --env; its repository mirror is bound read-only for drift syncs. */
static int apply_snapshot(struct cli_sandbox_opts *o, struct snap_store *store,
			  const struct snap_manifest *m)
{
	size_t n = m->n_layers;
	const char **layers =
	    wr_calloc(n + o->cfg.n_layers + 1, sizeof(char *));
	if (!layers)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		layers[i] =
		    own(o, snap_store_layer_path(store, m->layers[i].id));
		if (!layers[i]) {
			free(layers);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < o->cfg.n_layers; i++)
		layers[n + i] = o->cfg.layers[i];
	free(o->cfg.layers);
	o->cfg.layers = layers;
	o->cfg.n_layers += n;

	json_t *cenv =
	    m->extra ? json_object_get(m->extra, "container_env") : NULL;
	size_t n_cenv = json_is_object(cenv) ? json_object_size(cenv) : 0;
	if (n_cenv) {
		const char **env =
		    wr_calloc(n_cenv + o->cfg.n_env + 1, sizeof(char *));
		if (!env)
			return -ENOMEM;
		size_t k = 0;
		const char *key;
		json_t *value;
		json_object_foreach(cenv, key, value)
		{
			const char *v = json_string_value(value);
			if (v)
				env[k] = own(o, wr_asprintf("%s=%s", key, v));
			if (env[k])
				k++;
		}
		for (size_t i = 0; i < o->cfg.n_env; i++)
			env[k++] = o->cfg.env[i];
		free(o->cfg.env);
		o->cfg.env = env;
		o->cfg.n_env = k;
	}

	const char *mirror = own(o, snap_session_mirror(o->data_dir, m));
	if (mirror) {
		struct sandbox_bind b = {mirror, MIRROR_IN_SANDBOX, true};
		struct sandbox_bind *binds =
		    wr_realloc(o->cfg.binds, (o->cfg.n_binds + 1) * sizeof(b));
		if (!binds)
			return -ENOMEM;
		binds[o->cfg.n_binds++] = b;
		o->cfg.binds = binds;
	}
	return 0;
}

char *cli_data_dir(const char *data)
{
	return snap_data_dir(data);
}

int cli_resolve_snapshot(const char *verb, struct cli_sandbox_opts *o)
{
	/* every sandbox records the data directory it belongs to, so that
	 * `sandbox ls` shows its own warren's only */
	o->data_dir = cli_data_dir(o->data);
	if (!o->data_dir) {
		fprintf(stderr, "warren sandbox %s: out of memory\n", verb);
		return WR_EXIT_FAILURE;
	}
	o->cfg.data_dir = o->data_dir;
	if (!o->snapshot) {
		if (o->ref) {
			cli_usage_error(verb, "--ref needs --snapshot");
			return WR_EXIT_USAGE;
		}
		return 0;
	}
	if (o->cfg.rootfs) {
		cli_usage_error(verb,
				"--snapshot and --rootfs exclude each other");
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	int r = snap_store_open(o->data_dir, &store, &err);
	if (r == 0)
		r = snap_store_get(store, o->snapshot, &o->manifest, &err);
	if (r == 0)
		r = apply_snapshot(o, store, o->manifest);
	snap_store_close(store);
	if (r < 0) {
		fprintf(stderr, "warren sandbox %s: --snapshot %s: %s\n", verb,
			o->snapshot, err && err->msg ? err->msg : strerror(-r));
		int code =
		    err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
		wr_error_free(err);
		return code;
	}
	return 0;
}

void cli_sandbox_opts_clear(struct cli_sandbox_opts *o)
{
	snap_manifest_free(o->manifest);
	o->manifest = NULL;
	free(o->data_dir);
	o->data_dir = NULL;
	for (size_t i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	o->owned = NULL;
	o->n_owned = 0;
	sandbox_config_clear(&o->cfg);
}

int cmd_sandbox(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(sandbox_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? WR_EXIT_USAGE : 0;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "run"))
		return cmd_sandbox_run(argc - 1, argv + 1);
	if (!strcmp(sub, "create"))
		return cmd_sandbox_create(argc - 1, argv + 1);
	if (!strcmp(sub, "exec"))
		return cmd_sandbox_exec(argc - 1, argv + 1);
	if (!strcmp(sub, "ls"))
		return cmd_sandbox_ls(argc - 1, argv + 1);
	if (!strcmp(sub, "rm"))
		return cmd_sandbox_rm(argc - 1, argv + 1);
	fprintf(stderr, "warren sandbox: unknown command '%s'\n", sub);
	fputs(sandbox_usage, stderr);
	return WR_EXIT_USAGE;
}
