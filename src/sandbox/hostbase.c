/* hostbase.c - the bottom layer of a host-mode sandbox.
 *
 * Host mode shows the host's /usr read-only. Everything else a shell expects
 * at the top level - the merged-/usr symlinks (/bin -> usr/bin ...), empty
 * mount points, and a small /etc (generated passwd/group/hosts, so the
 * host's users are not disclosed, plus copies of the few host files a shell
 * and the dynamic linker read) - is prepared once as an ordinary layer and
 * cached under the runtime directory. A sandbox then needs one bind mount
 * for /usr instead of dozens for /etc, and /etc is writable (copy-up) inside.
 *
 * The cache key is a fingerprint of what was copied (inode, size, mtime of
 * each host file, symlink targets), so a host update produces a new base. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HOSTBASE_VERSION "hostbase-1"

const char *const hostbase_top_entries[] = {"bin",   "sbin",  "lib",
					    "lib32", "lib64", "libx32"};
const size_t hostbase_n_top_entries = ARRAY_SIZE(hostbase_top_entries);

static const char *const etc_copies[] = {
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "bash.bashrc",
    "profile",
    "profile.d",
    "inputrc",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "os-release",
    "debian_version",
    "shells",
    "login.defs",
    "environment",
    "mime.types",
    "timezone",
    "gai.conf",
    "protocols",
    "services",
    "host.conf",
    "mailcap",
    "magic",
    "adduser.conf",
    "skel",
};

static const char *const empty_dirs[] = {
    "usr", "proc", "dev", "tmp",     "run",	  "workspace", "home",	  "mnt",
    "opt", "srv",  "var", "var/tmp", "var/cache", "var/lib",   "var/log",
};

static const char passwd_text[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group_text[] = "root:x:0:\ntty:x:5:\nusers:x:100:\n"
				 "nogroup:x:65534:\n";
static const char hosts_text[] = "127.0.0.1\tlocalhost warren\n"
				 "::1\tlocalhost ip6-localhost ip6-loopback\n";

/* FNV-1a: a cache key, not a security boundary. */
static void fnv(uint64_t *h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		*h ^= p[i];
		*h *= 0x100000001b3ULL;
	}
}

static void fingerprint_path(uint64_t *h, const char *path)
{
	struct stat st;
	fnv(h, path, strlen(path) + 1);
	if (lstat(path, &st) < 0)
		return;
	uint64_t v[4] = {(uint64_t)st.st_ino, (uint64_t)st.st_size,
			 (uint64_t)st.st_mtim.tv_sec,
			 (uint64_t)st.st_mtim.tv_nsec};
	fnv(h, v, sizeof(v));
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(path, target, sizeof(target));
		if (n > 0)
			fnv(h, target, (size_t)n);
	}
}

/* Directories whose entries change without their parent's mtime changing
 * (a certificate added to /etc/ssl/certs changes certs/, not ssl/). Listed
 * rather than walked: the fingerprint is taken at every sandbox start. */
static const char *const etc_nested_dirs[] = {
    "/etc/ssl/certs",
    "/etc/ca-certificates/update.d",
    "/etc/skel/.config",
};

static uint64_t host_fingerprint(void)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	fnv(&h, HOSTBASE_VERSION, sizeof(HOSTBASE_VERSION));
	for (size_t i = 0; i < ARRAY_SIZE(hostbase_top_entries); i++) {
		char path[64];
		snprintf(path, sizeof(path), "/%s", hostbase_top_entries[i]);
		fingerprint_path(&h, path);
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_copies); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/etc/%s", etc_copies[i]);
		fingerprint_path(&h, path);
	}
	for (size_t i = 0; i < ARRAY_SIZE(etc_nested_dirs); i++)
		fingerprint_path(&h, etc_nested_dirs[i]);
	return h;
}

static int write_text(const char *dir, const char *name, const char *text,
		      mode_t mode)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return wr_write_file_atomic(path, text, strlen(text), mode, false);
}

static int build_base(const char *dir)
{
	int r;
	if (mkdir(dir, 0755) < 0)
		return -errno;
	char path[4096];
	for (size_t i = 0; i < ARRAY_SIZE(empty_dirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, empty_dirs[i]);
		if (mkdir(path, 0755) < 0)
			return -errno;
	}
	snprintf(path, sizeof(path), "%s/tmp", dir);
	chmod(path, 01777);
	snprintf(path, sizeof(path), "%s/var/tmp", dir);
	chmod(path, 01777);
	snprintf(path, sizeof(path), "%s/root", dir);
	if (mkdir(path, 0700) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(hostbase_top_entries); i++) {
		char host[64];
		snprintf(host, sizeof(host), "/%s", hostbase_top_entries[i]);
		snprintf(path, sizeof(path), "%s/%s", dir,
			 hostbase_top_entries[i]);
		struct stat st;
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			r = wr_copy_tree(host, path);
		} else if (S_ISDIR(st.st_mode)) {
			/* a real directory (no merged /usr): bound at start */
			r = mkdir(path, 0755) < 0 ? -errno : 0;
		} else {
			continue;
		}
		if (r < 0)
			return r;
	}
	char etc[4096];
	snprintf(etc, sizeof(etc), "%s/etc", dir);
	if (mkdir(etc, 0755) < 0)
		return -errno;
	for (size_t i = 0; i < ARRAY_SIZE(etc_copies); i++) {
		char host[128];
		snprintf(host, sizeof(host), "/etc/%s", etc_copies[i]);
		snprintf(path, sizeof(path), "%s/%s", etc, etc_copies[i]);
		if (access(host, F_OK) < 0 && errno == ENOENT) {
			struct stat st;
			if (lstat(host, &st) < 0)
				continue; /* absent on this host */
		}
		/* only what every host user may read: /etc/ssl/private and
		 * other root-only files stay on the host */
		r = wr_copy_tree_public(host, path);
		if (r < 0 && r != -EACCES)
			return r;
	}
	if ((r = write_text(etc, "passwd", passwd_text, 0644)) < 0 ||
	    (r = write_text(etc, "group", group_text, 0644)) < 0 ||
	    (r = write_text(etc, "hosts", hosts_text, 0644)) < 0 ||
	    (r = write_text(etc, "hostname", "warren\n", 0644)) < 0)
		return r;
	/* owned by the store range like every layer (see internal.h) */
	return wr_chown_tree(dir, WR_STORE_UID, WR_STORE_UID);
}

/* base/current names the base whose fingerprint was checked last; for
 * FINGERPRINT_TTL_S seconds after that, sandboxes use it without taking the
 * fingerprint again (three syscalls instead of forty). A host change shows
 * up in new sandboxes within that time. */
#define FINGERPRINT_TTL_S 10

static char *recent_base(void)
{
	_cleanup_free_ char *current = runtime_path("base/current");
	struct stat st;
	if (!current || lstat(current, &st) < 0 ||
	    time(NULL) - st.st_mtime >= FINGERPRINT_TTL_S ||
	    time(NULL) < st.st_mtime)
		return NULL;
	char target[64];
	ssize_t n = readlink(current, target, sizeof(target) - 1);
	if (n <= 0)
		return NULL;
	target[n] = '\0';
	if (strchr(target, '/'))
		return NULL;
	char *path = runtime_path("base/%s", target);
	if (path && access(path, F_OK) < 0) {
		free(path);
		return NULL;
	}
	return path;
}

static void mark_current(uint64_t fp)
{
	char name[32];
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)fp);
	_cleanup_free_ char *tmp =
	    runtime_path("base/.current-%d", (int)getpid());
	_cleanup_free_ char *current = runtime_path("base/current");
	if (!tmp || !current)
		return;
	unlink(tmp);
	if (symlink(name, tmp) == 0 && rename(tmp, current) < 0)
		unlink(tmp);
}

char *hostbase_ensure(struct wr_error **err)
{
	char *recent = recent_base();
	if (recent)
		return recent;
	uint64_t fp = host_fingerprint();
	char *path = runtime_path("base/%016llx", (unsigned long long)fp);
	if (!path) {
		wr_error_set(err, ENOMEM, "host base layer");
		return NULL;
	}
	struct stat st;
	if (stat(path, &st) == 0) {
		mark_current(fp);
		return path;
	}
	_cleanup_free_ char *parent = runtime_path("base");
	_cleanup_free_ char *tmp =
	    runtime_path("base/.build-%d", (int)getpid());
	if (!parent || !tmp) {
		free(path);
		wr_error_set(err, ENOMEM, "host base layer");
		return NULL;
	}
	wr_mkdir_p(parent, 0700);
	wr_rm_rf(tmp);
	int r = build_base(tmp);
	if (r < 0) {
		wr_rm_rf(tmp);
		wr_error_set(err, -r, "build host base layer in %s", tmp);
		free(path);
		return NULL;
	}
	/* publish atomically; if another warren won the race, use theirs */
	if (rename(tmp, path) < 0) {
		int e = errno;
		wr_rm_rf(tmp);
		if (e != EEXIST && e != ENOTEMPTY) {
			wr_error_set(err, e, "publish host base layer %s",
				     path);
			free(path);
			return NULL;
		}
	}
	mark_current(fp);
	/* older bases (a host update changed the fingerprint) go when no
	 * sandbox could still use them: a base is only ever the lowest layer
	 * of running sandboxes, so keep the previous ones for an hour */
	DIR *d = opendir(parent);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "current"))
			continue;
		char old[4096];
		snprintf(old, sizeof(old), "%s/%s", parent, de->d_name);
		if (strcmp(old, path) && stat(old, &st) == 0 &&
		    time(NULL) - st.st_mtime > 3600)
			wr_rm_rf(old);
	}
	if (d)
		closedir(d);
	return path;
}
