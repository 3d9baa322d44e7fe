/* main.c - `warren serve [--data DIR] [--listen ADDR:PORT] [--config FILE]
 * [--store URL]`: the control plane (warren-serve; `warren serve` execs
 * it).
 *
 * Opens the store, creates the admin token on first start, reconciles what
 * a previous server left, starts the scheduler, Slack's notifier (with a
 * "slack" configuration) and the HTTP API, and on SIGTERM/SIGINT stops
 * cleanly: the API first (no new work), then the notifier, then every
 * running session is checkpointed to `interrupted` and resumes at the next
 * start. */
#include "api/api.h"
#include "cli/serve/audit.h"
#include "cli/serve/config.h"
#include "notify/slack.h"
#include "sched/control.h"
#include "security/audit.h"
#include "security/secrets.h"
#include "security/secrets_store.h"
#include "store/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/json_alloc.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_FAIL 1

static const char usage_text[] =
    "usage: warren serve [--data DIR] [--listen ADDR:PORT] [--config FILE]\n"
    "                    [--store URL] [--role all|api|worker]\n"
    "\n"
    "Runs the Warren control plane: the session queue and scheduler, the\n"
    "sandboxes' lifecycle and the HTTP API (docs/api.md).\n"
    "\n"
    "  --data DIR          data directory (default $WARREN_HOME, else "
    "./.warren)\n"
    "  --listen ADDR:PORT  where the API listens (default 127.0.0.1:7777)\n"
    "  --config FILE       settings: limits, repositories, agent "
    "(docs/operations.md)\n"
    "  --store URL         the store: postgres://USER@HOST/DB (PostgreSQL),\n"
    "                      sqlite:PATH or a path (default DIR/warren.db)\n"
    "  --role ROLE         all (default): the API and the sessions' runners;\n"
    "                      api: the API alone, over a store that a server\n"
    "                      running sessions shares (PostgreSQL);\n"
    "                      worker: one of several servers running sessions\n"
    "                      over a shared store: each session claimed with a\n"
    "                      lease, renewed, fenced (configuration \"worker\")\n"
    "\n"
    "On first start the admin token is written to DIR/admin.token (0600).\n";

/* The web UI's files: the configuration's "web_dir" ("" for none), else
 * $WARREN_WEB_DIR, else web/ of the source tree the binary was built in
 * (build/warren-serve), else share/warren/web next to an installed bin/.
 * NULL: none found, or none wanted. Caller frees. */
static char *web_dir_find(const char *configured, const char *self)
{
	if (configured)
		return *configured ? wr_strdup(configured) : NULL;
	const char *env = getenv("WARREN_WEB_DIR");
	if (env && *env)
		return wr_strdup(env);
	static const char *const near[] = {"%s/../web",
					   "%s/../share/warren/web"};
	for (size_t i = 0; i < ARRAY_SIZE(near); i++) {
		char *dir = wr_asprintf(near[i], self);
		_cleanup_free_ char *index =
		    dir ? wr_asprintf("%s/index.html", dir) : NULL;
		if (index && access(index, R_OK) == 0)
			return dir;
		free(dir);
	}
	return NULL;
}

static void fail(const char *what, struct wr_error *err)
{
	wr_log_error("%s: %s", what, err && err->msg ? err->msg : "failed");
}

/* One server per data directory: the store's queue and the sandboxes'
 * names assume it. The lock dies with the process (kill -9 included). */
static int lock_data_dir(const char *data, struct wr_error **err)
{
	_cleanup_free_ char *path = wr_asprintf("%s/serve.lock", data);
	if (!path)
		return wr_error_set(err, ENOMEM, "lock");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return wr_error_input(
			    err, EBUSY, "another warren serve uses %s", data);
		return wr_error_set(err, e, "lock %s", path);
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == 0 && write(fd, pid, (size_t)n) < 0) {
		/* the pid is informational */
	}
	return fd; /* kept open for the process's life */
}

/* Is there a token an admin can still use? */
static int has_active_admin(struct store *st, struct wr_error **err)
{
	struct store_token *v = NULL;
	size_t n = 0;
	int r = st->ops->token_list(st, &v, &n, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	bool found = false;
	for (size_t i = 0; i < n && !found; i++)
		found = v[i].role && !strcmp(v[i].role, "admin") &&
			v[i].revoked_ms == 0 &&
			(v[i].expires_ms == 0 || now < v[i].expires_ms);
	store_tokens_free(v, n);
	return found;
}

/* The first start creates the admin token, named "admin"; its plain text
 * is written once to DATA/admin.token for the local CLI. A start that
 * finds every admin token revoked or expired makes a new one the same way
 * (named "admin-" and random digits, "admin" being taken): whoever can
 * read the data directory holds the database anyway, and without it the
 * API could never be administered again. */
static int admin_token(struct store *st, const char *data,
		       struct wr_error **err)
{
	int n = st->ops->token_count(st, err);
	if (n < 0)
		return n;
	if (n > 0) {
		int found = has_active_admin(st, err);
		if (found != 0)
			return found < 0 ? found : 0;
	}
	_cleanup_free_ char *plain = NULL;
	struct api_token_spec spec = {
	    .user = "admin", .role = "admin", .name = n == 0 ? "admin" : NULL};
	int r = api_token_issue(st, &spec, &plain, NULL, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = wr_asprintf("%s/admin.token", data);
	_cleanup_free_ char *line = wr_asprintf("%s\n", plain);
	explicit_bzero(plain, strlen(plain)); /* a credential: line has it */
	if (!path || !line)
		return wr_error_set(err, ENOMEM, "admin token");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return wr_error_set(err, errno, "write %s", path);
	size_t len = strlen(line);
	bool ok = fchmod(fd, 0600) == 0 &&
		  write(fd, line, len) == (ssize_t)len && fsync(fd) == 0;
	int e = errno;
	close(fd);
	explicit_bzero(line, len);
	if (!ok)
		return wr_error_set(err, e, "write %s", path);
	if (n == 0)
		wr_log_info("admin token written to %s", path);
	else
		wr_log_warn("every admin token was revoked or has expired: a "
			    "new one is written to %s",
			    path);
	return 0;
}

/* Repositories named in the configuration, registered if new. */
static void register_repos(struct store *st, struct control *ctl,
			   const struct serve_config *cfg)
{
	for (size_t i = 0; i < cfg->n_repos; i++) {
		const struct serve_repo *r = &cfg->repos[i];
		struct store_repo have;
		struct wr_error *err = NULL;
		if (r->name &&
		    st->ops->repo_get(st, r->name, &have, NULL) == 0) {
			store_repo_clear(&have);
			continue;
		}
		if (control_repo_add(ctl, r->name, r->url, r->ref,
				     r->refresh_ms, r->agent_json, &have,
				     &err) == 0)
			store_repo_clear(&have);
		else
			fail("configured repository", err);
		wr_error_free(err);
	}
}

int main(int argc, char **argv)
{
	/* every JSON document of the server (configuration, API bodies,
	 * events) through wr_malloc: WARREN_ALLOC_FAIL_AT reaches them */
	wr_json_alloc_init();
	/* `warren audit` reads the store: it runs here */
	if (argc > 1 && !strcmp(argv[1], "audit"))
		return cmd_audit(argc - 1, argv + 1);
	/* argv[1] is "serve" when run through `warren serve` */
	if (argc > 1 && !strcmp(argv[1], "serve")) {
		argv++;
		argc--;
	}
	static const struct option opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"listen", required_argument, NULL, 'l'},
	    {"config", required_argument, NULL, 'c'},
	    {"store", required_argument, NULL, 's'},
	    {"role", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *data_opt = NULL, *listen_opt = NULL, *config_opt = NULL;
	const char *store_opt = NULL;
	bool api_only = false, worker = false;
	int ch;
	while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': data_opt = optarg; break;
		case 'l': listen_opt = optarg; break;
		case 'c': config_opt = optarg; break;
		case 's': store_opt = optarg; break;
		case 'r':
			if (!strcmp(optarg, "api")) {
				api_only = true;
			} else if (!strcmp(optarg, "worker")) {
				worker = true;
			} else if (strcmp(optarg, "all")) {
				fprintf(stderr,
					"warren serve: --role '%s': all, api or "
					"worker\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h': fputs(usage_text, stdout); return 0;
		default:
			fputs("Try 'warren serve --help'.\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr,
			"warren serve: unexpected argument '%s'\n"
			"Try 'warren serve --help'.\n",
			argv[optind]);
		return EXIT_USAGE;
	}

	struct wr_error *err = NULL;
	/* before any thread starts: the threshold is read without a lock */
	if (wr_log_setup("warren-serve", &err) < 0) {
		wr_log_error("%s", err->msg);
		wr_error_free(err);
		return EXIT_USAGE;
	}
	struct serve_config cfg;
	serve_config_defaults(&cfg);
	char *listen_addr = wr_strdup("127.0.0.1");
	uint16_t port = 7777;
	if (config_opt && serve_config_load(config_opt, &cfg, &err) < 0) {
		fail("config", err);
		return err && err->bad_input ? EXIT_USAGE : EXIT_FAIL;
	}
	if (cfg.listen_addr) {
		free(listen_addr);
		listen_addr = wr_strdup(cfg.listen_addr);
		port = cfg.port;
	}
	if (listen_opt &&
	    serve_parse_listen(listen_opt, &listen_addr, &port, &err) < 0) {
		fail("--listen", err);
		return EXIT_USAGE;
	}
	const char *home = getenv("WARREN_HOME");
	_cleanup_free_ char *data = wr_strdup(data_opt	      ? data_opt
					      : home && *home ? home
							      : ".warren");
	_cleanup_free_ char *store_url = NULL, *self = wr_self_dir(),
			    *warren = NULL;
	_cleanup_free_ char *web_dir = NULL;
	if (!data || !listen_addr || !self) {
		wr_log_error("out of memory");
		return EXIT_FAIL;
	}
	if (wr_mkdir_p(data, 0700) < 0) {
		wr_log_error("create %s: %s", data, strerror(errno));
		return EXIT_FAIL;
	}
	char *abs = realpath(data, NULL);
	if (abs) {
		free(data);
		data = abs;
	}
	/* the store: --store, else the file's "store", else the embedded
	 * default in the data directory */
	store_url = store_opt	? wr_strdup(store_opt)
		    : cfg.store ? wr_strdup(cfg.store)
				: wr_asprintf("%s/warren.db", data);
	warren = wr_asprintf("%s/warren", self);
	if (!store_url || !warren || access(warren, X_OK) < 0) {
		wr_log_error("cannot find %s", warren ? warren : "warren");
		return EXIT_FAIL;
	}
	if (lock_data_dir(data, &err) < 0) {
		fail("data directory", err);
		return err && err->bad_input ? EXIT_USAGE : EXIT_FAIL;
	}

	/* Signals are taken by this thread alone (sigwait below): block them
	 * before any thread starts so every thread inherits the mask.
	 * Children get an empty mask back (proc.c). */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	int code = EXIT_FAIL;
	_cleanup_free_ char *config_abs = NULL; /* the blobs' file */
	struct control_forge *forges = NULL;
	struct perimeter_credentials *creds = NULL;
	struct control_staleness *stale = NULL;
	struct store *st = store_open(store_url, &err);
	_cleanup_free_ char *store_shown = store_url_redact(store_url);
	struct control *ctl = NULL;
	struct slack_outbox *outbox = NULL;
	struct slack_notifier *notifier = NULL;
	struct api *api = NULL;
	struct secrets_sync *secrets_sync = NULL;
	if (!st) {
		fail("store", err);
		if (err && err->bad_input)
			code = EXIT_USAGE;
		goto out;
	}
	if (admin_token(st, data, &err) < 0) {
		fail("admin token", err);
		goto out;
	}
	/* the audit logs an older server kept in files move into the
	 * store once (security/audit.h) */
	size_t audit_skipped = 0;
	int imported = audit_store_import_dir(st, data, &audit_skipped, &err);
	if (imported > 0)
		wr_log_info("audit: %d log(s) of DATA/audit imported into the "
			    "store",
			    imported);
	if (imported < 0 || audit_skipped)
		wr_log(WR_LOG_ERROR, "audit",
		       "%zu log(s) of DATA/audit left as files (`warren audit "
		       "verify` still reads them): %s",
		       audit_skipped,
		       err && err->msg ? err->msg : "not imported");
	wr_error_free(err);
	err = NULL;
	/* the secrets: one key for every host, if configured; on a shared
	 * store, DATA/secrets synced with the store's copy now and then
	 * every few seconds (security/secrets_store.h) */
	if (cfg.secrets_key_file &&
	    secrets_use_key_file(cfg.secrets_key_file, &err) < 0) {
		fail("config", err);
		code = EXIT_USAGE;
		goto out;
	}
	if (secrets_sync_start(st, data, &secrets_sync, &err) < 0) {
		fail("secrets", err);
		goto out;
	}
	cfg.control.data_dir = data;
	cfg.control.warren_bin = warren;
	/* builds are pushed to the registry: `warren snapshot push --blobs`
	 * reads the "blobs" object from the configuration file itself */
	if (cfg.has_blobs && config_opt)
		config_abs = realpath(config_opt, NULL);
	cfg.control.blobs_file = config_abs;
	cfg.control.blobs = cfg.has_blobs ? &cfg.blobs : NULL;
	cfg.control.default_agent_json = cfg.agent_json;
	/* the egress proxy keeps sandboxes away from the API itself */
	cfg.control.api_addr = listen_addr;
	cfg.control.api_port = port;
	/* forges of the configured repositories (pull requests on approval) */
	forges = cfg.n_repos ? wr_calloc(cfg.n_repos, sizeof(*forges)) : NULL;
	size_t n_forges = 0;
	for (size_t i = 0; forges && i < cfg.n_repos; i++) {
		const struct serve_repo *r = &cfg.repos[i];
		if (!r->has_forge || !r->name)
			continue;
		forges[n_forges++] = (struct control_forge){
		    .repo_name = r->name,
		    .forge = {.kind = r->forge_kind,
			      .api_url = r->forge_api_url,
			      .repo = r->forge_repo,
			      .token = r->forge_token,
			      .base_branch = r->forge_base}};
	}
	cfg.control.forges = forges;
	cfg.control.n_forges = n_forges;
	/* the remotes' credentials, for the credential broker */
	creds = cfg.n_repos ? wr_calloc(cfg.n_repos, sizeof(*creds)) : NULL;
	size_t n_creds = 0;
	for (size_t i = 0; creds && i < cfg.n_repos; i++) {
		const struct serve_repo *r = &cfg.repos[i];
		if (!r->has_credentials)
			continue;
		creds[n_creds++] = (struct perimeter_credentials){
		    .repo_name = r->name,
		    .username = r->cred_username,
		    .password = r->cred_password,
		    .password_secret = r->cred_password_secret,
		    .ssh_key_file = r->cred_ssh_key_file,
		    .known_hosts_file = r->cred_known_hosts_file};
	}
	cfg.control.credentials = creds;
	cfg.control.n_credentials = n_creds;
	/* the staleness policies: the server's default, then each
	 * repository's */
	stale = wr_calloc(cfg.n_repos + 1, sizeof(*stale));
	size_t n_stale = 0;
	if (stale && cfg.has_staleness)
		stale[n_stale++] = (struct control_staleness){
		    .max_age_ms = cfg.stale_max_age_ms,
		    .max_behind = cfg.stale_max_behind};
	for (size_t i = 0; stale && i < cfg.n_repos; i++) {
		const struct serve_repo *r = &cfg.repos[i];
		if (r->has_staleness)
			stale[n_stale++] = (struct control_staleness){
			    .repo_name = r->name,
			    .max_age_ms = r->stale_max_age_ms,
			    .max_behind = r->stale_max_behind};
	}
	cfg.control.staleness = stale;
	cfg.control.n_staleness = n_stale;
	/* an API server: sessions are taken, stored and streamed; another
	 * server on the same store runs them */
	if (api_only && !st->ops->watch) {
		fprintf(stderr, "warren serve: --role api needs a store other "
				"servers share (--store postgres://...): %s "
				"is this server's alone\n",
			store_backend_name(st));
		code = EXIT_USAGE;
		goto out;
	}
	if (api_only)
		cfg.control.no_worker = true;
	/* a worker among others: claims, leases, fencing (sched/lease.c) */
	char worker_id[STORE_ID_MAX];
	if (worker) {
		if (!st->ops->watch)
			wr_log(WR_LOG_WARN, "serve",
			       "--role worker over %s: only this host's "
			       "processes share it",
			       store_backend_name(st));
		if (cfg.worker_id) {
			snprintf(worker_id, sizeof(worker_id), "%s",
				 cfg.worker_id);
		} else {
			/* the same host and data directory: the same
			 * worker, whose previous life's leases it ends */
			char host[64] = "";
			gethostname(host, sizeof(host) - 1);
			unsigned long h = 5381;
			for (const char *p = data; *p; p++)
				h = h * 33 + (unsigned char)*p;
			snprintf(worker_id, sizeof(worker_id), "%.40s-%08lx",
				 host[0] ? host : "worker", h & 0xffffffffUL);
		}
		cfg.control.worker_id = worker_id;
		wr_log_info("worker %s (lease %llu ms)", worker_id,
			    (unsigned long long)(cfg.control.lease_ms
						     ? cfg.control.lease_ms
						     : 15000));
	}
	if (control_start(&cfg.control, st, &ctl, &err) < 0) {
		fail("control plane", err);
		goto out;
	}
	register_repos(st, ctl, &cfg);
	/* Slack's posts: what a previous server left is posted too */
	if (cfg.has_slack && (slack_outbox_open(st, &outbox, &err) < 0 ||
			      slack_notifier_start(&cfg.slack, outbox, st, ctl,
						   &notifier, &err) < 0)) {
		fail("slack", err);
		goto out;
	}
	web_dir = web_dir_find(cfg.web_dir, self);
	struct api_config acfg = {.st = st,
				  .ctl = ctl,
				  .listen_addr = listen_addr,
				  .port = port,
				  .data_dir = data,
				  .blobs = cfg.has_blobs ? &cfg.blobs : NULL,
				  .web_dir = web_dir,
				  .slack = cfg.has_slack ? &cfg.slack : NULL,
				  .slack_outbox = outbox,
				  .max_per_client = cfg.api_max_per_client,
				  .header_timeout_ms =
				      cfg.api_header_timeout_ms,
				  .body_timeout_ms = cfg.api_body_timeout_ms};
	if (api_start(&acfg, &api, &err) < 0) {
		fail("api", err);
		goto out;
	}
	wr_log_info("listening on http://%s:%u (data %s, store %s%s)",
		    listen_addr, (unsigned)api_port(api), data,
		    store_shown ? store_shown : store_backend_name(st),
		    api_only ? ", role api" : worker ? ", role worker" : "");
	if (web_dir)
		wr_log_info("web UI at http://%s:%u/ (%s)", listen_addr,
			    (unsigned)api_port(api), web_dir);
	if (cfg.has_slack)
		wr_log_info("Slack at http://%s:%u/slack/commands and "
			    "/slack/events (%zu users mapped)",
			    listen_addr, (unsigned)api_port(api),
			    cfg.slack.n_users);
	int sig = 0;
	while (sigwait(&sigs, &sig) != 0 || sig == SIGHUP)
		;
	wr_log_info("%s, stopping", strsignal(sig));
	code = 0;
out:
	api_stop(api);
	slack_notifier_stop(notifier);
	control_stop(ctl);
	secrets_sync_stop(secrets_sync);
	slack_outbox_close(outbox);
	store_close(st);
	wr_error_free(err);
	free(forges);
	free(creds);
	free(stale);
	serve_config_clear(&cfg);
	free(listen_addr);
	return code;
}
