/* layer.c - building and reusing the agents layer (see layer.h).
 *
 *   DATA/agents/<id>.lock           flock: one builder per id, in any process
 *   DATA/agents/.build-<id>.XXXXXX  a build's stage: the sandbox's --upper;
 *                                   npm installs into its
 *                                   upper/opt/warren-agents/out
 *   DATA/agents/<id>/               that out directory, renamed here once
 *                                   installed, checked, marked and made
 *                                   read-only
 *   DATA/logs/agents-<id12>-<t>.log the build's log: npm's output and the
 *                                   egress proxy's decisions
 */
#include "agents/layer.h"

#include "sandbox/request.h"
#include "snapshot/build_proxy.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LAYER_FORMAT "warren-agents-layer-v1"
#define SPEC_MAX 256
#define REGISTRY_MAX 512
#define TAIL_LINES 12
#define TAIL_READ_BYTES (64 * 1024)
/* a waiter gives up this long after the builder's own deadline */
#define LOCK_SLACK_MS (60 * 1000)
/* `warren sandbox run` enforces the timeout; ours is the backstop */
#define SPAWN_SLACK_MS (30 * 1000)

/* Where the build sandbox installs (the stage's upper keeps it). */
#define SANDBOX_ROOT "/opt/warren-agents"
#define SANDBOX_OUT SANDBOX_ROOT "/out"
#define SANDBOX_HOME SANDBOX_ROOT "/home"

/* ---- specs and the id ---------------------------------------------------- */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}

/* "name@version" or "@scope/name@version", [a-z0-9@/._-] only: a plain
 * registry spec, never a URL, a path, a git or file: spec, an alias or an
 * option. */
static bool spec_valid(const char *s)
{
	size_t len = s ? strlen(s) : 0;
	if (len == 0 || len > SPEC_MAX)
		return false;
	const char *p = s;
	if (*p == '@') { /* a scope */
		p++;
		const char *slash = strchr(p, '/');
		if (!slash || slash == p)
			return false;
		for (; p < slash; p++)
			if (!name_char(*p))
				return false;
		p++;
	}
	const char *at = strchr(p, '@');
	if (!at || at == p || !at[1])
		return false;
	if (*p == '.' || *p == '_' || *p == '-')
		return false;
	for (; p < at; p++)
		if (!name_char(*p))
			return false;
	for (p = at + 1; *p; p++)
		if (!name_char(*p))
			return false;
	/* no "..", and a version starts with a letter or digit */
	return !strstr(s, "..") && at[1] != '.' && at[1] != '-';
}

/* The package's name: the spec up to its version's '@'. */
static char *spec_name(const char *s)
{
	const char *at = strchr(s[0] == '@' ? s + 1 : s, '@');
	return wr_strndup(s, (size_t)(at - s));
}

/* An http(s) URL of plain characters; *allow gets "host" or "host:port",
 * what the proxy allows (caller frees). */
static int registry_check(const char *url, char **allow, struct wr_error **err)
{
	struct wr_url_parts u;
	size_t len = url ? strlen(url) : 0;
	bool plain = len > 0 && len <= REGISTRY_MAX;
	for (size_t i = 0; plain && i < len; i++)
		plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
			       "VWXYZ0123456789.:/_-",
			       url[i]) != NULL;
	if (!plain || !wr_url_http_parts(url, &u) || u.host[0] == '[' ||
	    strstr(url, "@")) {
		return wr_error_input(err, EINVAL,
				      "agents layer: registry '%s': expected "
				      "an http(s) URL of a host name "
				      "(\"https://registry.npmjs.org/\")",
				      url ? url : "(null)");
	}
	/* host[:port]: the origin after "scheme://" */
	const char *host = u.host;
	size_t n = (size_t)(url + u.origin_len - host);
	*allow = wr_strndup(host, n);
	if (!*allow)
		return wr_error_set(err, ENOMEM, "agents layer");
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The specs, checked and sorted (borrowed strings, caller frees the
 * array). */
static int sorted_specs(const struct agents_layer_req *req, const char ***out,
			struct wr_error **err)
{
	if (req->n_packages == 0 ||
	    req->n_packages > AGENTS_LAYER_MAX_PACKAGES || !req->packages)
		return wr_error_input(err, EINVAL,
				      "agents layer: %zu packages (expected 1 "
				      "to %d)",
				      req->n_packages,
				      AGENTS_LAYER_MAX_PACKAGES);
	for (size_t i = 0; i < req->n_packages; i++)
		if (!spec_valid(req->packages[i]))
			return wr_error_input(
			    err, EINVAL,
			    "agents layer: package '%s' is not a plain npm "
			    "spec: expected name@version of [a-z0-9@/._-] "
			    "(\"opencode-ai@1.18.33\"; no URL, file:, git: or "
			    "range)",
			    req->packages[i] ? req->packages[i] : "(null)");
	const char **v = wr_calloc(req->n_packages + 1, sizeof(char *));
	if (!v)
		return wr_error_set(err, ENOMEM, "agents layer");
	memcpy(v, req->packages, req->n_packages * sizeof(char *));
	qsort(v, req->n_packages, sizeof(char *), cmp_str);
	for (size_t i = 1; i < req->n_packages; i++)
		if (!strcmp(v[i], v[i - 1])) {
			free(v);
			return wr_error_input(err, EINVAL,
					      "agents layer: package '%s' "
					      "given twice",
					      v[i]);
		}
	*out = v;
	return 0;
}

int agents_layer_id(const struct agents_layer_req *req, char id[65],
		    struct wr_error **err)
{
	_cleanup_free_ const char **specs = NULL;
	_cleanup_free_ char *allow = NULL;
	int r = sorted_specs(req, &specs, err);
	if (r < 0)
		return r;
	r = registry_check(req->registry, &allow, err);
	if (r < 0)
		return r;
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	static const char format[] = LAYER_FORMAT "\n";
	crypto_hash_sha256_update(&st, (const unsigned char *)format,
				  sizeof(format) - 1);
	/* NUL-separated: no two inputs hash alike */
	crypto_hash_sha256_update(&st, (const unsigned char *)req->registry,
				  strlen(req->registry) + 1);
	for (size_t i = 0; i < req->n_packages; i++)
		crypto_hash_sha256_update(&st, (const unsigned char *)specs[i],
					  strlen(specs[i]) + 1);
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, digest);
	sodium_bin2hex(id, 65, digest, sizeof(digest));
	return 0;
}

/* ---- the directory: complete layers, locks, stale stages ----------------- */

static bool layer_complete(const char *dir)
{
	_cleanup_free_ char *marker =
	    wr_asprintf("%s/" AGENTS_LAYER_MARKER, dir);
	struct stat st;
	return marker && lstat(marker, &st) == 0 && S_ISREG(st.st_mode);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Waits for the id's lock (a builder elsewhere holds it while it builds);
 * the locked descriptor, or -errno. A lock is released by the kernel when
 * its holder dies, so a killed server never leaves one held. */
static int lock_id(int agents_fd, const char *id, uint64_t wait_ms,
		   struct wr_error **err)
{
	char name[80];
	snprintf(name, sizeof(name), "%s.lock", id);
	_cleanup_close_ int fd =
	    openat(agents_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		   0600);
	if (fd < 0)
		return wr_error_set(err, errno, "agents layer: open %s", name);
	double deadline = now_ms() + (double)wait_ms;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return wr_error_set(err, errno,
					    "agents layer: lock %s", name);
		if (now_ms() > deadline)
			return wr_error_set(err, ETIMEDOUT,
					    "agents layer %.12s: another build "
					    "of it held %s for more than %llu s",
					    id, name,
					    (unsigned long long)(wait_ms /
								 1000));
		usleep(50 * 1000);
	}
	return TAKE_FD(fd);
}

static bool is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Removes the stages nobody builds in: ours (we hold its lock, which a
 * builder's sandbox kept held until its last process was gone) and those
 * of any id whose lock is free (their builder died with its server).
 * Best effort: what cannot be removed now is tried again next time. */
static void remove_stale_stages(const char *agents, int agents_fd,
				const char *own_id)
{
	DIR *d = wr_opendir_at(agents_fd);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		static const char prefix[] = ".build-";
		if (strncmp(de->d_name, prefix, sizeof(prefix) - 1))
			continue;
		const char *id = de->d_name + sizeof(prefix) - 1;
		const char *dot = strchr(id, '.');
		if (!dot || !is_hex64(id, (size_t)(dot - id)))
			continue;
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", agents, de->d_name);
		if (!path)
			continue;
		if (!strncmp(id, own_id, 64)) {
			wr_rm_rf(path);
			continue;
		}
		char lock[80];
		snprintf(lock, sizeof(lock), "%.64s.lock", id);
		_cleanup_close_ int fd =
		    openat(agents_fd, lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		/* no lock file: a stage no builder of ours made */
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
			wr_rm_rf(path); /* closing fd releases the lock */
	}
	closedir(d);
}

/* chmod a-w over a tree (symlinks left alone: their mode means nothing). */
static int drop_write(const char *fpath, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_SL)
		return 0;
	if (chmod(fpath, st->st_mode & 07555) < 0)
		return -errno;
	return 0;
}

/* ---- the install --------------------------------------------------------- */

/* The builder's children (`warren sandbox run`) get nothing of ours. */
static const char *const child_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
					NULL};

/* Runs in the sandbox as `sh -c SCRIPT sh SPEC...`: the specs are argv,
 * never part of a script. */
static const char install_script[] =
    "set -u\n"
    "mkdir -p " SANDBOX_OUT " " SANDBOX_HOME " || exit 1\n"
    "cd " SANDBOX_OUT " || exit 1\n"
    "exec npm install --ignore-scripts --no-audit --no-fund "
    "--no-update-notifier --save-exact --prefix " SANDBOX_OUT " \"$@\"\n";

/* npm's configuration: none of the host's, the registry given, its cache
 * in the stage (removed with it). */
#define NPM_ENV_N 8

/* The last lines of the log worth showing: npm's, not the proxy's
 * decisions nor the sandbox's JSON answer (whose exit_code and
 * timed_out it reads). */
struct log_tail {
	char text[4096];
	int exit_code; /* -1: no answer */
	bool timed_out;
};

static void read_log_tail(const char *log_path, struct log_tail *t)
{
	t->text[0] = '\0';
	t->exit_code = -1;
	t->timed_out = false;
	_cleanup_close_ int fd = open(log_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > TAIL_READ_BYTES ? size - TAIL_READ_BYTES : 0;
	_cleanup_free_ char *buf = wr_malloc(TAIL_READ_BYTES + 1);
	ssize_t n = buf ? pread(fd, buf, TAIL_READ_BYTES, from) : -1;
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *lines[TAIL_LINES];
	size_t kept = 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "egress: ", 8) ||
		    !strncmp(line, "agents layer ", 13))
			continue;
		if (line[0] == '{' && strstr(line, "\"exit_code\"")) {
			json_t *j = json_loads(line, 0, NULL);
			json_t *code = json_object_get(j, "exit_code");
			if (json_is_integer(code)) {
				t->exit_code = (int)json_integer_value(code);
				t->timed_out = json_is_true(
				    json_object_get(j, "timed_out"));
				json_decref(j);
				continue;
			}
			json_decref(j);
		}
		if (kept == TAIL_LINES) {
			memmove(lines, lines + 1,
				(TAIL_LINES - 1) * sizeof(char *));
			kept--;
		}
		lines[kept++] = line;
	}
	size_t used = 0;
	for (size_t i = 0; i < kept && used + 8 < sizeof(t->text); i++)
		used += (size_t)snprintf(t->text + used, sizeof(t->text) - used,
					 "\n    %s", lines[i]);
}

/* Installs the specs into STAGE/upper/opt/warren-agents/out in a build
 * sandbox whose only way out is the proxy allowing the registry. */
static int install(const struct agents_layer_req *req, const char *id,
		   const char *stage, const char *allow, const char *log_path,
		   int log_fd, int lock_fd, uint64_t timeout_ms,
		   struct wr_error **err)
{
	struct build_proxy proxy = {0};
	struct build_proxy_opts po = {
	    .warren = req->warren_bin,
	    .data_dir = req->data_dir,
	    .egress_config = req->egress_config,
	    .allow = (const char *const[]){allow},
	    .n_allow = 1,
	    .log_fd = log_fd,
	};
	int r = build_proxy_start(&po, &proxy, err);
	if (r < 0)
		return wr_error_wrap(err, "agents layer %.12s", id);
	_cleanup_free_ char *script = build_proxy_script(&proxy, install_script);
	_cleanup_free_ char *registry_env =
	    wr_asprintf("npm_config_registry=%s", req->registry);
	const char **argv = wr_calloc(req->n_packages + 5, sizeof(char *));
	if (!script || !registry_env || !argv) {
		r = wr_error_set(err, ENOMEM, "agents layer");
		goto out;
	}
	size_t n = 0;
	argv[n++] = "sh";
	argv[n++] = "-c";
	argv[n++] = script;
	argv[n++] = "sh";
	for (size_t i = 0; i < req->n_packages; i++)
		argv[n++] = req->packages[i];
	argv[n] = NULL;

	struct sandbox_request sreq = {.upper = stage};
	sreq.env[sreq.n_env++] = "HOME=" SANDBOX_HOME;
	sreq.env[sreq.n_env++] = "PATH=/usr/local/sbin:/usr/local/bin:"
				 "/usr/sbin:/usr/bin:/sbin:/bin";
	sreq.env[sreq.n_env++] = "npm_config_cache=" SANDBOX_HOME "/.npm";
	/* neither exists: no .npmrc but ours (the environment) */
	sreq.env[sreq.n_env++] = "npm_config_userconfig=" SANDBOX_HOME "/.npmrc";
	sreq.env[sreq.n_env++] = "npm_config_globalconfig=" SANDBOX_ROOT "/npmrc";
	sreq.env[sreq.n_env++] = "npm_config_update_notifier=false";
	sreq.env[sreq.n_env++] = "NO_UPDATE_NOTIFIER=1";
	/* a registry that fails: npm's two retries within seconds, not its
	 * default minute */
	sreq.env[sreq.n_env++] = "npm_config_fetch_retry_mintimeout=2000";
	sreq.env[sreq.n_env++] = "npm_config_fetch_retry_maxtimeout=10000";
	sreq.env[sreq.n_env++] = registry_env;
	build_proxy_request(&proxy, &sreq);
	sreq.argv = (char *const *)argv;
	sreq.json = true;
	sreq.timeout_ms = timeout_ms;
	sreq.data_dir = req->data_dir; /* listed under it by `sandbox ls` */
	/* a builder killed with its server takes the sandbox down */
	sreq.die_with_parent = true;
	struct sandbox_cmdline cl;
	r = sandbox_cmdline_run(req->warren_bin, &sreq, &cl);
	if (r < 0) {
		r = wr_error_set(err, -r, "agents layer %.12s: command line",
				 id);
		goto out;
	}
	dprintf(log_fd, "agents layer %s: npm install", id);
	for (size_t i = 0; i < req->n_packages; i++)
		dprintf(log_fd, " %s", req->packages[i]);
	dprintf(log_fd, " from %s\n", req->registry);
	struct spawn_call call = {
	    .argv = (const char *const *)cl.argv,
	    .envp = child_env,
	    .in_fd = -1,
	    .out_fd = log_fd,
	    .err_fd = log_fd,
	    .timeout_ms = timeout_ms + SPAWN_SLACK_MS,
	    .die_with_parent = true,
	    /* the id's lock, held by `warren sandbox run` too: it exits
	     * only once every process of the sandbox is gone, so a builder
	     * killed mid-install keeps its stage locked until nothing
	     * writes into it any more (not inherited by the sandbox) */
	    .fd3 = lock_fd,
	};
	size_t out_len = 0;
	call.out_len = &out_len;
	call.out_max = UINT64_MAX;
	int status = spawn_run(&call, err);
	sandbox_cmdline_clear(&cl);
	if (status < 0 && status != -ETIMEDOUT) {
		r = wr_error_wrap(err, "agents layer %.12s", id);
		goto out;
	}
	struct log_tail tail;
	read_log_tail(log_path, &tail);
	/* (errno 0 in the message: npm's lines end it, not strerror) */
	if (status == -ETIMEDOUT || tail.timed_out) {
		wr_error_set(err, 0,
				 "agents layer %.12s: npm install did not end "
				 "within %llu s (log: %s)%s",
				 id, (unsigned long long)(timeout_ms / 1000),
				 log_path, tail.text);
		r = -ETIMEDOUT;
		goto out;
	}
	int code = tail.exit_code >= 0 ? tail.exit_code : status;
	if (code != 0) {
		wr_error_set(err, 0,
				 "agents layer %.12s: npm install %s%s failed "
				 "with status %d (log: %s)%s",
				 id, req->packages[0],
				 req->n_packages > 1 ? " ..." : "", code,
				 log_path, tail.text);
		r = -EIO;
		goto out;
	}
	r = 0;
out:
	free(argv);
	build_proxy_stop(&proxy);
	return r;
}

/* What npm left is what was asked: each package's package.json. */
static int check_installed(const struct agents_layer_req *req, const char *id,
			   const char *out_dir, const char *log_path,
			   struct wr_error **err)
{
	for (size_t i = 0; i < req->n_packages; i++) {
		_cleanup_free_ char *name = spec_name(req->packages[i]);
		_cleanup_free_ char *pj =
		    name ? wr_asprintf("%s/node_modules/%s/package.json",
				       out_dir, name)
			 : NULL;
		if (!pj)
			return wr_error_set(err, ENOMEM, "agents layer");
		struct stat st;
		if (lstat(pj, &st) < 0 || !S_ISREG(st.st_mode))
			return wr_error_set(err, EIO,
					    "agents layer %.12s: npm install "
					    "succeeded but left no "
					    "node_modules/%s (log: %s)",
					    id, name, log_path);
	}
	return 0;
}

static int write_marker(const struct agents_layer_req *req, const char *id,
			const char *out_dir, struct wr_error **err)
{
	json_t *pkgs = json_array();
	for (size_t i = 0; pkgs && i < req->n_packages; i++)
		json_array_append_new(pkgs, json_string(req->packages[i]));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	json_t *m = pkgs ? json_pack("{s:s, s:s, s:s, s:o, s:I}", "format",
				     LAYER_FORMAT, "id", id, "registry",
				     req->registry, "packages", pkgs,
				     "created_ms",
				     (json_int_t)now.tv_sec * 1000 +
					 now.tv_nsec / 1000000)
			 : NULL;
	_cleanup_free_ char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
	json_decref(m);
	_cleanup_free_ char *path =
	    wr_asprintf("%s/" AGENTS_LAYER_MARKER, out_dir);
	if (!text || !path)
		return wr_error_set(err, ENOMEM, "agents layer");
	int r = wr_write_file_atomic(path, text, strlen(text), 0444, true);
	if (r < 0)
		return wr_error_set(err, -r, "agents layer %.12s: write %s",
				    id, path);
	/* owned like the rest of the layer (the sandbox's files) */
	struct stat st;
	if (stat(out_dir, &st) == 0 && lchown(path, st.st_uid, st.st_gid) < 0)
		return wr_error_set(err, errno, "agents layer %.12s: chown %s",
				    id, path);
	return 0;
}

/* Under the id's lock: build into a stage, publish by rename. */
static int build(const struct agents_layer_req *req, const char *id,
		 const char *agents, const char *final, const char *allow,
		 int lock_fd, uint64_t timeout_ms, struct wr_error **err)
{
	_cleanup_free_ char *logs = wr_asprintf("%s/logs", req->data_dir);
	_cleanup_free_ char *log_path =
	    wr_asprintf("%s/logs/agents-%.12s-%lld.log", req->data_dir, id,
			(long long)time(NULL));
	_cleanup_free_ char *stage =
	    wr_asprintf("%s/.build-%s.XXXXXX", agents, id);
	if (!logs || !log_path || !stage)
		return wr_error_set(err, ENOMEM, "agents layer");
	wr_mkdir_p(logs, 0700);
	_cleanup_close_ int log_fd =
	    open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log_fd < 0)
		return wr_error_set(err, errno, "agents layer: open %s",
				    log_path);
	if (!mkdtemp(stage))
		return wr_error_set(err, errno,
				    "agents layer: create a stage under %s",
				    agents);
	_cleanup_free_ char *out_dir =
	    wr_asprintf("%s/upper" SANDBOX_OUT, stage);
	int r = out_dir ? install(req, id, stage, allow, log_path, log_fd,
				  lock_fd, timeout_ms, err)
			: wr_error_set(err, ENOMEM, "agents layer");
	if (r == 0)
		r = check_installed(req, id, out_dir, log_path, err);
	if (r == 0)
		r = write_marker(req, id, out_dir, err);
	if (r == 0 && nftw(out_dir, drop_write, 32, FTW_PHYS) != 0)
		r = wr_error_set(err, errno ? errno : EIO,
				 "agents layer %.12s: make %s read-only", id,
				 out_dir);
	/* the publication: before it, nothing at final; after it, a
	 * complete layer */
	if (r == 0 && rename(out_dir, final) < 0)
		r = wr_error_set(err, errno, "agents layer: rename %s to %s",
				 out_dir, final);
	if (r == 0)
		dprintf(log_fd, "agents layer %s: ready at %s\n", id, final);
	else if (err && *err)
		dprintf(log_fd, "agents layer %s: failed: %s\n", id,
			(*err)->msg);
	wr_rm_rf(stage);
	return r;
}

int agents_layer_ensure(const struct agents_layer_req *req, char **path,
			struct wr_error **err)
{
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "libsodium init");
	if (!req || !req->data_dir || !req->warren_bin)
		return wr_error_set(err, EINVAL,
				    "agents layer: no data directory or "
				    "warren binary");
	char id[65];
	int r = agents_layer_id(req, id, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *allow = NULL;
	r = registry_check(req->registry, &allow, err);
	if (r < 0)
		return r;
	uint64_t timeout_ms =
	    req->timeout_ms ? req->timeout_ms : AGENTS_LAYER_TIMEOUT_MS_DEFAULT;
	_cleanup_free_ char *agents = wr_asprintf("%s/agents", req->data_dir);
	_cleanup_free_ char *final =
	    agents ? wr_asprintf("%s/%s", agents, id) : NULL;
	if (!final)
		return wr_error_set(err, ENOMEM, "agents layer");
	/* the common case: built already, no lock needed (a complete layer
	 * is never changed again) */
	if (layer_complete(final)) {
		*path = TAKE_PTR(final);
		return 0;
	}
	r = wr_mkdir_p(agents, 0755);
	if (r < 0)
		return wr_error_set(err, -r, "agents layer: mkdir %s", agents);
	_cleanup_close_ int agents_fd =
	    open(agents, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (agents_fd < 0)
		return wr_error_set(err, errno, "agents layer: open %s",
				    agents);
	_cleanup_close_ int lock =
	    lock_id(agents_fd, id, timeout_ms + SPAWN_SLACK_MS + LOCK_SLACK_MS,
		    err);
	if (lock < 0)
		return lock;
	remove_stale_stages(agents, agents_fd, id);
	/* built while we waited: reused */
	if (layer_complete(final)) {
		*path = TAKE_PTR(final);
		return 0;
	}
	/* a directory there without its marker is no layer (none of ours
	 * leaves one: only a complete one is renamed in) */
	struct stat st;
	if (lstat(final, &st) == 0 && (r = wr_rm_rf(final)) < 0)
		return wr_error_set(err, -r, "agents layer: remove %s", final);
	r = build(req, id, agents, final, allow, lock, timeout_ms, err);
	if (r < 0)
		return r;
	*path = TAKE_PTR(final);
	return 0;
}
