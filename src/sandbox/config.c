/* config.c - checking a sandbox configuration before anything is created.
 * Every message names the option the user got wrong. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/parse.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sandbox_config_clear(struct sandbox_config *cfg)
{
	free(cfg->layers);
	free(cfg->binds);
	free(cfg->env);
	memset(cfg, 0, sizeof(*cfg));
}

static int check_dir(const char *opt, const char *path, struct wr_error **err)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return wr_error_input(err, errno, "%s %s", opt, path);
	if (!S_ISDIR(st.st_mode))
		return wr_error_input(err, ENOTDIR, "%s %s", opt, path);
	return 0;
}

/* Is a inside b (or equal), comparing resolved paths? */
static bool path_within(const char *a, const char *b)
{
	size_t lb = strlen(b);
	if (strncmp(a, b, lb) != 0)
		return false;
	return a[lb] == '\0' || a[lb] == '/' || (lb == 1 && b[0] == '/');
}

static int check_inside_path(const char *opt, const char *path,
			     struct wr_error **err)
{
	if (!path || path[0] != '/')
		return wr_error_input(err, EINVAL,
				      "%s %s: must be an absolute path", opt,
				      path ? path : "(null)");
	if (strlen(path) >= 1024)
		return wr_error_input(err, ENAMETOOLONG, "%s", opt);
	/* ".." would be resolved inside the root anyway; refuse it so the
	 * user's intent is unambiguous */
	for (const char *p = path; (p = strstr(p, "..")); p += 2) {
		if ((p == path || p[-1] == '/') &&
		    (p[2] == '/' || p[2] == '\0'))
			return wr_error_input(err, EINVAL,
					      "%s %s: '..' is not allowed", opt,
					      path);
	}
	return 0;
}

/* realpath() of path, or of its parent plus its last component when path
 * does not exist yet. */
static int resolve_maybe_missing(const char *path, char out[PATH_MAX])
{
	if (realpath(path, out))
		return 0;
	if (errno != ENOENT)
		return -errno;
	char copy[PATH_MAX];
	if (strlen(path) >= sizeof(copy))
		return -ENAMETOOLONG;
	strcpy(copy, path);
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	char parent[PATH_MAX];
	if (!realpath(slash ? (slash == copy ? "/" : (*slash = '\0', copy))
			    : ".",
		      parent))
		return -errno;
	if (strlen(parent) + strlen(base) + 2 > PATH_MAX)
		return -ENAMETOOLONG;
	snprintf(out, PATH_MAX, "%s/%s", strcmp(parent, "/") ? parent : "",
		 base);
	return 0;
}

int sandbox_config_validate(const struct sandbox_config *cfg,
			    struct wr_error **err)
{
	int r;
	if (cfg->name && wr_validate_name(cfg->name) < 0)
		return wr_error_input(
		    err, EINVAL,
		    "--name '%s': use 1-63 letters, digits, '_', "
		    "'.', '-', starting with a letter or digit",
		    cfg->name);
	if (cfg->hostname && (wr_validate_name(cfg->hostname) < 0))
		return wr_error_input(err, EINVAL, "--hostname '%s': invalid",
				      cfg->hostname);
	if (cfg->net >= SANDBOX_NET_MAX)
		return wr_error_input(err, EINVAL, "--net: unsupported mode");
	if (cfg->rootfs && (r = check_dir("--rootfs", cfg->rootfs, err)) < 0)
		return r;
	if (cfg->n_layers + (cfg->rootfs ? 1 : 0) > WR_MAX_LAYERS)
		return wr_error_input(err, E2BIG, "--layer: at most %d layers",
				      WR_MAX_LAYERS);
	for (size_t i = 0; i < cfg->n_layers; i++) {
		if ((r = check_dir("--layer", cfg->layers[i], err)) < 0)
			return r;
	}
	if (cfg->n_binds > WR_MAX_BINDS)
		return wr_error_input(err, E2BIG, "--bind: at most %d binds",
				      WR_MAX_BINDS);
	for (size_t i = 0; i < cfg->n_binds; i++) {
		struct stat st;
		if (stat(cfg->binds[i].source, &st) < 0)
			return wr_error_input(err, errno, "--bind %s",
					      cfg->binds[i].source);
		r = check_inside_path("--bind destination", cfg->binds[i].dest,
				      err);
		if (r < 0)
			return r;
		if (!strcmp(cfg->binds[i].dest, "/"))
			return wr_error_input(err, EINVAL,
					      "--bind: cannot bind over /");
	}
	if (cfg->cwd && (r = check_inside_path("--cwd", cfg->cwd, err)) < 0)
		return r;
	for (size_t i = 0; i < cfg->n_env; i++) {
		const char *eq = strchr(cfg->env[i], '=');
		if (!eq || eq == cfg->env[i])
			return wr_error_input(err, EINVAL,
					      "--env '%s': expected KEY=VALUE",
					      cfg->env[i]);
	}
	if (cfg->upper) {
		char upper[PATH_MAX], other[PATH_MAX];
		/* a not-yet-existing upper is created: resolve its parent */
		if (resolve_maybe_missing(cfg->upper, upper) == 0) {
			const char *lowers[WR_MAX_LAYERS + 1];
			size_t n = 0;
			if (cfg->rootfs)
				lowers[n++] = cfg->rootfs;
			for (size_t i = 0; i < cfg->n_layers; i++)
				lowers[n++] = cfg->layers[i];
			for (size_t i = 0; i < n; i++) {
				if (!realpath(lowers[i], other))
					continue;
				if (path_within(upper, other) ||
				    path_within(other, upper))
					return wr_error_input(
					    err, EINVAL,
					    "--upper %s overlaps layer %s "
					    "(overlayfs needs them apart)",
					    cfg->upper, lowers[i]);
			}
		}
	}
	if (cfg->memory_bytes && cfg->memory_bytes < (4ULL << 20))
		return wr_error_input(err, EINVAL, "--memory: at least 4M");
	if (cfg->disk_bytes && cfg->disk_bytes < (1ULL << 20))
		return wr_error_input(err, EINVAL, "--disk: at least 1M");
	if (cfg->inodes && !(cfg->upper && cfg->disk_bytes))
		return wr_error_input(err, EINVAL,
				      "--inodes needs --upper and --disk (the "
				      "layer's own filesystem)");
	if (cfg->inodes && cfg->inodes < 64)
		return wr_error_input(err, EINVAL, "--inodes: at least 64");
	if (cfg->pids && cfg->pids < 2)
		return wr_error_input(err, EINVAL, "--pids: at least 2");
	return 0;
}
