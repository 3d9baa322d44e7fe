/* store.c - the snapshot layer store (see store.h for the layout, the ids
 * and the rules of liveness and concurrency).
 *
 * Everything that appears in layers/, layers/.keys/ or snapshots/ is made
 * complete under DATA/tmp first and moved in by rename(2), under the flock
 * on DATA/.lock, so a reader sees all of it or none, and a crash leaves
 * only debris under DATA/tmp. What lives in DATA/tmp is flocked by the
 * handle that owns it (stage directories, lease files, layers being
 * deleted); an entry nobody holds a lock on belongs to a dead process and
 * is swept under the store lock.
 *
 * What a manifest holds, its JSON and its id are manifest.c's: this file
 * reads, writes and lists the files. */
#include "snapshot/store_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST_MAX_BYTES (1024 * 1024)
#define STORE_MAX_MANIFESTS 100000
#define STORE_MAX_STAGES 64
#define STORE_MAX_PINS 4096
#define STORE_MAX_IDS (1u << 22) /* ids gc keeps track of */
#define STAGE_LABEL_MAX 32
#define STAGE_PREFIX "stage."
#define LEASE_PREFIX "lease."
#define MANIFEST_SUFFIX ".json"
#define TMP_PATH_MAX (PATH_MAX + NAME_MAX + 2)

struct snap_stage {
	char name[NAME_MAX + 1]; /* under DATA/tmp */
	int fd;			 /* holds the flock */
};

struct snap_store {
	char *dir; /* absolute */
	char *tmp_dir;
	char *layers_dir;
	char *snaps_dir;
	int dir_fd, layers_fd, keys_fd, snaps_fd, tmp_fd;
	int lock_fd; /* DATA/.lock */
	struct snap_stage stages[STORE_MAX_STAGES];
	size_t n_stages;
	char (*pins)[SNAP_ID_LEN + 1];
	size_t n_pins;
	int lease_fd; /* -1 until the first pin */
	char lease_name[NAME_MAX + 1];
};

/* A growable set of ids: appended, then sorted for lookups. */
struct id_set {
	char (*ids)[SNAP_ID_LEN + 1];
	size_t n, cap;
};

/* ---- small helpers ------------------------------------------------------ */

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool snap_id_valid(const char *id)
{
	if (!id)
		return false;
	for (size_t i = 0; i < SNAP_ID_LEN; i++)
		if (!is_lower_hex(id[i]))
			return false;
	return id[SNAP_ID_LEN] == '\0';
}

static bool name_chars_valid(const char *s, size_t max, const char *extra)
{
	size_t len = strlen(s);
	if (len == 0 || len > max)
		return false;
	for (const char *p = s; *p; p++) {
		bool ok = (*p >= 'a' && *p <= 'z') ||
			  (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || strchr(extra, *p);
		if (!ok)
			return false;
	}
	return true;
}

bool snap_key_valid(const char *key)
{
	return key && key[0] != '.' &&
	       name_chars_valid(key, SNAP_KEY_MAX, "._-");
}

/* "<64 hex>.json" */
static bool manifest_name_valid(const char *name)
{
	char id[SNAP_ID_LEN + 1];
	if (strlen(name) != SNAP_ID_LEN + strlen(MANIFEST_SUFFIX) ||
	    strcmp(name + SNAP_ID_LEN, MANIFEST_SUFFIX))
		return false;
	memcpy(id, name, SNAP_ID_LEN);
	id[SNAP_ID_LEN] = '\0';
	return snap_id_valid(id);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Reads a small file of ours, not following a symlink. */
static int read_at(int dirfd, const char *name, size_t max, char **out,
		   size_t *out_len)
{
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_free_ char *buf = wr_malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
	buf[len] = '\0';
	*out = TAKE_PTR(buf);
	if (out_len)
		*out_len = len;
	return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* DATA/tmp/name, without allocating: cleanup paths must not fail. */
static const char *tmp_path(const struct snap_store *s, const char *name,
			    char buf[TMP_PATH_MAX])
{
	snprintf(buf, TMP_PATH_MAX, "%s/%s", s->tmp_dir, name);
	return buf;
}

static bool layer_exists(const struct snap_store *s, const char *id)
{
	struct stat st;
	return fstatat(s->layers_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* ---- locking ------------------------------------------------------------ */

static int store_lock(struct snap_store *s, struct wr_error **err)
{
	while (flock(s->lock_fd, LOCK_EX) < 0) {
		if (errno != EINTR)
			return wr_error_set(err, errno, "lock %s/.lock",
					    s->dir);
	}
	return 0;
}

static void store_unlockp(struct snap_store **s)
{
	if (*s)
		flock((*s)->lock_fd, LOCK_UN);
}
#define _cleanup_unlock_ _cleanup_(store_unlockp)

/* Writes data to DATA/tmp, makes it durable and renames it to dst_name in
 * dst_dir, then makes the rename durable. Call with the store lock held. */
static int publish_file(struct snap_store *s, const char *prefix,
			const void *data, size_t len, int dst_dir,
			const char *dst_name)
{
	char name[64], path[TMP_PATH_MAX];
	snprintf(name, sizeof(name), "%s.XXXXXX", prefix);
	tmp_path(s, name, path);
	_cleanup_close_ int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	const char *base = strrchr(path, '/') + 1;
	int r = write_all(fd, data, len);
	if (r == 0 && fchmod(fd, 0600) < 0)
		r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(s->tmp_fd, base, dst_dir, dst_name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(s->tmp_fd, base, 0);
		return r;
	}
	return fsync(dst_dir) < 0 ? -errno : 0;
}

/* ---- DATA/tmp: stage directories, leases, sweeping ---------------------- */

/* Removes every entry of DATA/tmp that no live process holds a lock on.
 * Best effort: what cannot be removed now is tried again next time. Call
 * with the store lock held (so nothing is between creation and lock). */
static void sweep_tmp(struct snap_store *s)
{
	_cleanup_closedir_ DIR *dir = wr_opendir_at(s->tmp_fd);
	if (!dir)
		return;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_close_ int fd = openat(
		    s->tmp_fd, de->d_name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0) {
			/* a symlink or a socket: nothing of ours */
			if (errno == ELOOP || errno == ENXIO)
				unlinkat(s->tmp_fd, de->d_name, 0);
			continue;
		}
		/* locks of other open file descriptions conflict even within
		 * this process, so our own stages count as live here */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) < 0)
			continue;
		char path[TMP_PATH_MAX];
		if (S_ISDIR(st.st_mode))
			wr_rm_rf(tmp_path(s, de->d_name, path));
		else
			unlinkat(s->tmp_fd, de->d_name, 0);
	}
}

static bool label_valid(const char *label)
{
	return label && name_chars_valid(label, STAGE_LABEL_MAX, "_-");
}

char *snap_store_stage_dir(struct snap_store *s, const char *label,
			   struct wr_error **err)
{
	if (!label_valid(label)) {
		wr_error_input(err, EINVAL,
			       "stage label '%s': expected 1 to %d of "
			       "[A-Za-z0-9_-]",
			       label ? label : "(null)", STAGE_LABEL_MAX);
		return NULL;
	}
	if (s->n_stages == STORE_MAX_STAGES) {
		wr_error_set(err, EMFILE, "stage directory: %d in use",
			     STORE_MAX_STAGES);
		return NULL;
	}
	_cleanup_free_ char *path =
	    wr_asprintf("%s/" STAGE_PREFIX "%s.XXXXXX", s->tmp_dir, label);
	if (!path) {
		wr_error_set(err, ENOMEM, "stage directory");
		return NULL;
	}
	_cleanup_unlock_ struct snap_store *locked = NULL;
	if (store_lock(s, err) < 0)
		return NULL;
	locked = s;
	if (!mkdtemp(path)) {
		wr_error_set(err, errno, "create stage directory under %s",
			     s->tmp_dir);
		return NULL;
	}
	const char *name = strrchr(path, '/') + 1;
	int fd = openat(s->tmp_fd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		wr_error_set(err, errno, "lock stage directory %s", path);
		if (fd >= 0)
			close(fd);
		unlinkat(s->tmp_fd, name, AT_REMOVEDIR);
		return NULL;
	}
	struct snap_stage *st = &s->stages[s->n_stages++];
	snprintf(st->name, sizeof(st->name), "%s", name);
	st->fd = fd;
	return TAKE_PTR(path);
}

/* Drops the lock on a stage (published or removed). */
static void forget_stage(struct snap_store *s, const char *name)
{
	for (size_t i = 0; i < s->n_stages; i++) {
		if (strcmp(s->stages[i].name, name))
			continue;
		close(s->stages[i].fd);
		s->stages[i] = s->stages[--s->n_stages];
		return;
	}
}

/* Rewrites the lease file with the current pins. Store lock held. */
static int lease_write(struct snap_store *s)
{
	if (s->lease_fd < 0) {
		_cleanup_free_ char *path =
		    wr_asprintf("%s/" LEASE_PREFIX "XXXXXX", s->tmp_dir);
		if (!path)
			return -ENOMEM;
		int fd = mkostemp(path, O_CLOEXEC);
		if (fd < 0)
			return -errno;
		const char *name = strrchr(path, '/') + 1;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int r = -errno;
			close(fd);
			unlinkat(s->tmp_fd, name, 0);
			return r;
		}
		s->lease_fd = fd;
		snprintf(s->lease_name, sizeof(s->lease_name), "%s", name);
	}
	size_t len = s->n_pins * (SNAP_ID_LEN + 1);
	_cleanup_free_ char *text = wr_malloc(len + 1);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_pins; i++) {
		memcpy(text + i * (SNAP_ID_LEN + 1), s->pins[i], SNAP_ID_LEN);
		text[i * (SNAP_ID_LEN + 1) + SNAP_ID_LEN] = '\n';
	}
	/* readers hold the store lock too: they never see it half-written */
	if (ftruncate(s->lease_fd, 0) < 0 ||
	    lseek(s->lease_fd, 0, SEEK_SET) < 0)
		return -errno;
	return write_all(s->lease_fd, text, len);
}

static int pin_layer(struct snap_store *s, const char *id)
{
	for (size_t i = 0; i < s->n_pins; i++)
		if (!strcmp(s->pins[i], id))
			return 0;
	if (s->n_pins == STORE_MAX_PINS)
		return -E2BIG;
	char(*grown)[SNAP_ID_LEN + 1] =
	    wr_realloc(s->pins, (s->n_pins + 1) * sizeof(*s->pins));
	if (!grown)
		return -ENOMEM;
	s->pins = grown;
	memcpy(s->pins[s->n_pins++], id, SNAP_ID_LEN + 1);
	int r = lease_write(s);
	if (r < 0)
		s->n_pins--;
	return r;
}

/* Releases the pins a published manifest made unnecessary. Failing to
 * rewrite the lease only keeps layers a little longer. */
static void unpin_layers(struct snap_store *s, const struct snap_manifest *m)
{
	size_t before = s->n_pins;
	for (size_t i = 0; i < m->n_layers; i++) {
		for (size_t j = 0; j < s->n_pins; j++) {
			if (strcmp(s->pins[j], m->layers[i].id))
				continue;
			memcpy(s->pins[j], s->pins[--s->n_pins],
			       sizeof(s->pins[j]));
			break;
		}
	}
	if (s->n_pins != before)
		lease_write(s);
}

/* ---- open / close ------------------------------------------------------- */

static int open_subdir(int parent, const char *name, int *out)
{
	if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = openat(parent, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*out = fd;
	return 0;
}

void snap_store_close(struct snap_store *s)
{
	if (!s)
		return;
	/* unpublished stages die with their handle */
	while (s->n_stages) {
		struct snap_stage *st = &s->stages[s->n_stages - 1];
		char path[TMP_PATH_MAX];
		wr_rm_rf(tmp_path(s, st->name, path));
		forget_stage(s, st->name);
	}
	if (s->lease_fd >= 0) {
		unlinkat(s->tmp_fd, s->lease_name, 0);
		close(s->lease_fd);
	}
	int fds[] = {s->dir_fd,	  s->layers_fd, s->keys_fd,
		     s->snaps_fd, s->tmp_fd,	s->lock_fd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(s->pins);
	free(s->dir);
	free(s->tmp_dir);
	free(s->layers_dir);
	free(s->snaps_dir);
	free(s);
}

static void store_closep(struct snap_store **s)
{
	snap_store_close(*s);
}

int snap_store_open(const char *data_dir, struct snap_store **out,
		    struct wr_error **err)
{
	if (!data_dir || !*data_dir)
		return wr_error_input(err, EINVAL, "empty data directory");
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "initialise libsodium");
	int r = wr_mkdir_p(data_dir, 0700);
	if (r < 0)
		return wr_error_set(err, -r, "create data directory %s",
				    data_dir);
	char real[PATH_MAX];
	if (!realpath(data_dir, real))
		return wr_error_set(err, errno, "data directory %s", data_dir);
	_cleanup_(store_closep) struct snap_store *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return wr_error_set(err, ENOMEM, "open snapshot store");
	s->dir_fd = s->layers_fd = s->keys_fd = s->snaps_fd = s->tmp_fd = -1;
	s->lock_fd = s->lease_fd = -1;
	s->dir = wr_strdup(real);
	s->tmp_dir = wr_asprintf("%s/tmp", real);
	s->layers_dir = wr_asprintf("%s/layers", real);
	s->snaps_dir = wr_asprintf("%s/snapshots", real);
	if (!s->dir || !s->tmp_dir || !s->layers_dir || !s->snaps_dir)
		return wr_error_set(err, ENOMEM, "open snapshot store");
	s->dir_fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0)
		return wr_error_set(err, errno, "open data directory %s", real);
	static const char *const subdirs[] = {"layers", "snapshots", "tmp"};
	int *fds[] = {&s->layers_fd, &s->snaps_fd, &s->tmp_fd};
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		r = open_subdir(s->dir_fd, subdirs[i], fds[i]);
		if (r < 0)
			return wr_error_set(err, -r, "create %s/%s", real,
					    subdirs[i]);
	}
	r = open_subdir(s->layers_fd, ".keys", &s->keys_fd);
	if (r < 0)
		return wr_error_set(err, -r, "create %s/.keys", s->layers_dir);
	s->lock_fd = openat(s->dir_fd, ".lock",
			    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return wr_error_set(err, errno, "open %s/.lock", real);
	if (store_lock(s, err) < 0)
		return wr_error_wrap(err, "open snapshot store");
	sweep_tmp(s);
	flock(s->lock_fd, LOCK_UN);
	*out = TAKE_PTR(s);
	return 0;
}

const char *snap_store_dir(const struct snap_store *s)
{
	return s->dir;
}

char *snap_store_layer_path(const struct snap_store *s, const char *layer_id)
{
	if (!snap_id_valid(layer_id)) {
		errno = EINVAL;
		return NULL;
	}
	return wr_asprintf("%s/%s", s->layers_dir, layer_id);
}

/* ---- layers and keys ---------------------------------------------------- */

/* staged_dir must be DATA/tmp/stage.X or DATA/tmp/stage.X/SUB; splits it
 * into its stage name and SUB ("" if none). */
static int parse_staged(const struct snap_store *s, const char *staged_dir,
			char stage[NAME_MAX + 1], char sub[NAME_MAX + 1],
			struct wr_error **err)
{
	size_t tlen = strlen(s->tmp_dir);
	char rest[2 * NAME_MAX + 2];
	if (!staged_dir || strncmp(staged_dir, s->tmp_dir, tlen) ||
	    staged_dir[tlen] != '/' ||
	    strlen(staged_dir + tlen + 1) >= sizeof(rest))
		goto invalid;
	snprintf(rest, sizeof(rest), "%s", staged_dir + tlen + 1);
	size_t len = strlen(rest);
	while (len && rest[len - 1] == '/')
		rest[--len] = '\0';
	char *slash = strchr(rest, '/');
	if (slash)
		*slash = '\0';
	const char *second = slash ? slash + 1 : "";
	if (strlen(rest) > NAME_MAX || strlen(second) > NAME_MAX ||
	    strchr(second, '/') ||
	    strncmp(rest, STAGE_PREFIX, strlen(STAGE_PREFIX)) ||
	    (slash &&
	     (!*second || !strcmp(second, ".") || !strcmp(second, ".."))))
		goto invalid;
	memcpy(stage, rest, strlen(rest) + 1);
	memcpy(sub, second, strlen(second) + 1);
	return 0;
invalid:
	return wr_error_input(err, EINVAL,
			      "publish layer: %s is not a stage directory "
			      "of %s (or a directory directly in one)",
			      staged_dir ? staged_dir : "(null)", s->tmp_dir);
}

int snap_store_publish_layer(struct snap_store *s, const char *staged_dir,
			     const char *key, char id_out[SNAP_ID_LEN + 1],
			     uint64_t *bytes_out, struct wr_error **err)
{
	char stage[NAME_MAX + 1], sub[NAME_MAX + 1];
	int r = parse_staged(s, staged_dir, stage, sub, err);
	if (r < 0)
		return r;
	if (key && !snap_key_valid(key))
		return wr_error_input(
		    err, EINVAL, "publish layer: invalid cache key '%s'", key);
	_cleanup_close_ int stage_fd = openat(
	    s->tmp_fd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (stage_fd < 0)
		return wr_error_set(err, errno, "publish layer %s", staged_dir);
	_cleanup_free_ char *path =
	    wr_asprintf("%s/%s%s%s", s->tmp_dir, stage, sub[0] ? "/" : "", sub);
	if (!path)
		return wr_error_set(err, ENOMEM, "publish layer");
	char id[SNAP_ID_LEN + 1];
	uint64_t bytes = 0;
	r = snap_layer_hash(path, id, &bytes, err);
	if (r < 0)
		return wr_error_wrap(err, "publish layer");
	/* The layer must be on disk before anything can name it: a manifest
	 * is fsync'ed, and must not outlive a power loss that the content
	 * did not. syncfs writes back what the builder left dirty. */
	if (syncfs(s->tmp_fd) < 0)
		return wr_error_set(err, errno, "publish layer: sync %s",
				    s->tmp_dir);
	_cleanup_unlock_ struct snap_store *locked = NULL;
	if ((r = store_lock(s, err)) < 0)
		return r;
	locked = s;
	/* under the lock nobody else creates or deletes layers/<id> */
	bool reused = layer_exists(s, id);
	if (!reused) {
		int src_dir = sub[0] ? stage_fd : s->tmp_fd;
		if (renameat(src_dir, sub[0] ? sub : stage, s->layers_fd, id) <
		    0)
			return wr_error_set(err, errno,
					    "publish layer: rename %s to %s/%s",
					    path, s->layers_dir, id);
		if (fsync(s->layers_fd) < 0)
			return wr_error_set(err, errno,
					    "publish layer: sync %s",
					    s->layers_dir);
	}
	if (key) {
		char line[SNAP_ID_LEN + 2];
		snprintf(line, sizeof(line), "%s\n", id);
		r = publish_file(s, "key", line, strlen(line), s->keys_fd, key);
		if (r < 0)
			return wr_error_set(
			    err, -r, "publish layer: record key %s", key);
	}
	r = pin_layer(s, id);
	if (r < 0)
		return wr_error_set(err, -r, "publish layer: pin %s", id);
	locked = NULL;
	flock(s->lock_fd, LOCK_UN);
	if (reused || sub[0]) {
		/* what fails to go now is swept once its lock is dropped */
		char stage_path[TMP_PATH_MAX];
		wr_rm_rf(tmp_path(s, stage, stage_path));
	}
	forget_stage(s, stage);
	memcpy(id_out, id, sizeof(id));
	if (bytes_out)
		*bytes_out = bytes;
	return 0;
}

int snap_store_layer_hold(struct snap_store *s, const char *layer_id,
			  struct wr_error **err)
{
	if (!snap_id_valid(layer_id))
		return wr_error_input(err, EINVAL, "'%s' is not a layer id",
				      layer_id ? layer_id : "(null)");
	_cleanup_unlock_ struct snap_store *locked = NULL;
	int r = store_lock(s, err);
	if (r < 0)
		return r;
	locked = s;
	if (!layer_exists(s, layer_id))
		return -ENOENT;
	if ((r = pin_layer(s, layer_id)) < 0)
		return wr_error_set(err, -r, "pin layer %s", layer_id);
	return 0;
}

/* The valid layer id in a key file, or -ENOENT. */
static int read_key(const struct snap_store *s, const char *key,
		    char id_out[SNAP_ID_LEN + 1])
{
	_cleanup_free_ char *text = NULL;
	int r = read_at(s->keys_fd, key, SNAP_ID_LEN + 1, &text, NULL);
	if (r < 0)
		return r == -EFBIG ? -ENOENT : r;
	text[strcspn(text, "\n")] = '\0';
	if (!snap_id_valid(text))
		return -ENOENT;
	memcpy(id_out, text, SNAP_ID_LEN + 1);
	return 0;
}

int snap_store_layer_by_key(struct snap_store *s, const char *key,
			    char id_out[SNAP_ID_LEN + 1])
{
	if (!snap_key_valid(key))
		return -EINVAL;
	_cleanup_unlock_ struct snap_store *locked = NULL;
	int r = store_lock(s, NULL);
	if (r < 0)
		return r;
	locked = s;
	/* checked and pinned under the lock: gc cannot come in between */
	char id[SNAP_ID_LEN + 1];
	r = read_key(s, key, id);
	if (r < 0)
		return r;
	if (!layer_exists(s, id))
		return -ENOENT;
	r = pin_layer(s, id);
	if (r < 0)
		return r;
	memcpy(id_out, id, sizeof(id));
	return 0;
}

/* ---- manifests ---------------------------------------------------------- */

static void manifest_freep(struct snap_manifest **m)
{
	snap_manifest_free(*m);
}

/* Reads snapshots/<id>.json: 0, -ENOENT, -ENOMEM, -EBADMSG (corrupt),
 * each with an error naming the file. */
static int load_manifest(const struct snap_store *s, const char *id,
			 struct snap_manifest **out, struct wr_error **err)
{
	char name[SNAP_ID_LEN + sizeof(MANIFEST_SUFFIX)];
	snprintf(name, sizeof(name), "%s" MANIFEST_SUFFIX, id);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	char why[SNAP_WHY_MAX] = "";
	int r = read_at(s->snaps_fd, name, MANIFEST_MAX_BYTES, &text, &len);
	if (r == -ENOENT)
		return wr_error_absent(err, true, "no snapshot %s", id);
	if (r == -EFBIG) {
		snprintf(why, sizeof(why), "larger than %d bytes",
			 MANIFEST_MAX_BYTES);
		r = -EBADMSG;
	} else if (r < 0) {
		return wr_error_set(err, -r, "read %s/%s", s->snaps_dir, name);
	}
	struct snap_manifest *m = NULL;
	if (r == 0)
		r = snap_manifest_parse(text, len, &m, why);
	if (r == 0 && strcmp(m->id, id)) {
		snap_manifest_free(m);
		snprintf(why, sizeof(why),
			 "its id does not match its file name");
		r = -EBADMSG;
	}
	if (r == -ENOMEM)
		return wr_error_set(err, ENOMEM, "read %s/%s", s->snaps_dir,
				    name);
	if (r < 0)
		return wr_error_set(err, EBADMSG,
				    "snapshot manifest %s/%s is corrupt: %s",
				    s->snaps_dir, name, why);
	*out = m;
	return 0;
}

/* Calls fn for every manifest file name's id, stopping at its first
 * non-zero return. */
static int each_manifest(const struct snap_store *s,
			 int (*fn)(const char *id, void *arg), void *arg)
{
	_cleanup_closedir_ DIR *dir = wr_opendir_at(s->snaps_fd);
	if (!dir)
		return -errno;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(dir))) {
		if (!manifest_name_valid(de->d_name))
			continue;
		char id[SNAP_ID_LEN + 1];
		memcpy(id, de->d_name, SNAP_ID_LEN);
		id[SNAP_ID_LEN] = '\0';
		int r = fn(id, arg);
		if (r)
			return r;
		errno = 0;
	}
	return errno ? -errno : 0;
}

struct prefix_match {
	const char *prefix;
	size_t len;
	size_t n;
	char first[SNAP_ID_LEN + 1];
};

static int match_prefix(const char *id, void *arg)
{
	struct prefix_match *pm = arg;
	if (strncmp(id, pm->prefix, pm->len))
		return 0;
	if (pm->n++ == 0)
		memcpy(pm->first, id, SNAP_ID_LEN + 1);
	return 0;
}

/* A full id or a unique prefix of an existing snapshot -> its id. */
static int resolve_id(const struct snap_store *s, const char *arg,
		      char id[SNAP_ID_LEN + 1], struct wr_error **err)
{
	char want[SNAP_ID_LEN + 1];
	size_t len = arg ? strlen(arg) : 0;
	bool ok = len >= SNAP_ID_PREFIX_MIN && len <= SNAP_ID_LEN;
	for (size_t i = 0; ok && i < len; i++) {
		char c = arg[i];
		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		ok = is_lower_hex(c);
		want[i] = c;
	}
	if (!ok)
		return wr_error_input(err, EINVAL,
				      "invalid snapshot id '%s': expected %d "
				      "to %d hex digits",
				      arg ? arg : "", SNAP_ID_PREFIX_MIN,
				      SNAP_ID_LEN);
	want[len] = '\0';
	if (len == SNAP_ID_LEN) {
		memcpy(id, want, sizeof(want));
		return 0;
	}
	struct prefix_match pm = {.prefix = want, .len = len};
	int r = each_manifest(s, match_prefix, &pm);
	if (r < 0)
		return wr_error_set(err, -r, "read %s", s->snaps_dir);
	if (pm.n == 0)
		return wr_error_absent(err, true, "no snapshot %s", want);
	if (pm.n > 1)
		return wr_error_input(err, 0,
				      "snapshot id %s is ambiguous: %zu "
				      "snapshots match",
				      want, pm.n);
	memcpy(id, pm.first, sizeof(pm.first));
	return 0;
}

int snap_store_get(struct snap_store *s, const char *id,
		   struct snap_manifest **out, struct wr_error **err)
{
	char full[SNAP_ID_LEN + 1];
	int r = resolve_id(s, id, full, err);
	if (r < 0)
		return r;
	return load_manifest(s, full, out, err);
}

int snap_store_publish_manifest(struct snap_store *s, struct snap_manifest *m,
				struct wr_error **err)
{
	char why[SNAP_WHY_MAX];
	if (snap_manifest_check(m, why) < 0)
		return wr_error_input(err, EINVAL,
				      "invalid snapshot manifest: %s", why);
	struct snap_manifest final = *m;
	if (!final.created_ms)
		final.created_ms = now_ms();
	_cleanup_free_ char *status = m->status ? NULL : wr_strdup("ready");
	if (!m->status && !status)
		return wr_error_set(err, ENOMEM, "publish snapshot manifest");
	if (status)
		final.status = status;
	char *text = snap_manifest_encode(&final, final.id);
	if (!text)
		return wr_error_set(err, ENOMEM, "publish snapshot manifest");
	_cleanup_free_ char *owned_text = text;
	size_t len = strlen(text);
	if (len > MANIFEST_MAX_BYTES)
		return wr_error_input(err, EFBIG,
				      "snapshot manifest of %zu bytes (at most "
				      "%d)",
				      len, MANIFEST_MAX_BYTES);
	text[len] = '\n'; /* json_dumps left room for its NUL */
	_cleanup_unlock_ struct snap_store *locked = NULL;
	int r = store_lock(s, err);
	if (r < 0)
		return r;
	locked = s;
	for (size_t i = 0; i < m->n_layers; i++)
		if (!layer_exists(s, m->layers[i].id))
			return wr_error_input(err, ENOENT,
					      "snapshot manifest: layer %s is "
					      "not in the store",
					      m->layers[i].id);
	char name[SNAP_ID_LEN + sizeof(MANIFEST_SUFFIX)];
	snprintf(name, sizeof(name), "%s" MANIFEST_SUFFIX, final.id);
	struct stat st;
	/* the same content was published before: same id, nothing to do */
	if (fstatat(s->snaps_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = publish_file(s, "manifest", text, len + 1, s->snaps_fd,
				 name);
		if (r < 0)
			return wr_error_set(err, -r, "write %s/%s",
					    s->snaps_dir, name);
	}
	unpin_layers(s, m);
	memcpy(m->id, final.id, sizeof(m->id));
	m->created_ms = final.created_ms;
	if (status)
		m->status = TAKE_PTR(status);
	return 0;
}

struct list_ctx {
	const struct snap_store *s;
	const char *repo;
	struct snap_manifest **items;
	size_t n, cap;
	int skipped;
	char *warning; /* the first few corrupt files */
};

static int list_one(const char *id, void *arg)
{
	struct list_ctx *c = arg;
	struct wr_error *lerr = NULL;
	struct snap_manifest *m = NULL;
	int r = load_manifest(c->s, id, &m, &lerr);
	if (r == -EBADMSG) {
		if (c->skipped++ < 3) {
			char *w = c->warning ? wr_asprintf("%s; %s", c->warning,
							   lerr->msg)
					     : wr_strdup(lerr->msg);
			if (w) {
				free(c->warning);
				c->warning = w;
			}
		}
		wr_error_free(lerr);
		return 0;
	}
	wr_error_free(lerr);
	if (r == -ENOENT) /* removed since readdir */
		return 0;
	if (r < 0)
		return r;
	if (c->repo && strcmp(m->repo, c->repo)) {
		snap_manifest_free(m);
		return 0;
	}
	if (c->n == c->cap) {
		if (c->cap == STORE_MAX_MANIFESTS) {
			snap_manifest_free(m);
			return -E2BIG;
		}
		size_t cap = c->cap ? c->cap * 2 : 16;
		if (cap > STORE_MAX_MANIFESTS)
			cap = STORE_MAX_MANIFESTS;
		struct snap_manifest **grown =
		    wr_realloc(c->items, cap * sizeof(*grown));
		if (!grown) {
			snap_manifest_free(m);
			return -ENOMEM;
		}
		c->items = grown;
		c->cap = cap;
	}
	c->items[c->n++] = m;
	return 0;
}

static int cmp_newest_first(const void *a, const void *b)
{
	const struct snap_manifest *x = *(struct snap_manifest *const *)a;
	const struct snap_manifest *y = *(struct snap_manifest *const *)b;
	if (x->created_ms != y->created_ms)
		return x->created_ms > y->created_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

int snap_store_list(struct snap_store *s, const char *repo,
		    struct snap_manifest ***out, size_t *n_out,
		    struct wr_error **err)
{
	struct list_ctx c = {.s = s, .repo = repo};
	int r = each_manifest(s, list_one, &c);
	if (r < 0) {
		snap_manifest_free_array(c.items, c.n);
		free(c.warning);
		if (r == -E2BIG)
			return wr_error_set(err, E2BIG,
					    "more than %d snapshots in %s",
					    STORE_MAX_MANIFESTS, s->snaps_dir);
		return wr_error_set(err, -r, "list %s", s->snaps_dir);
	}
	if (c.n)
		qsort(c.items, c.n, sizeof(*c.items), cmp_newest_first);
	if (c.skipped)
		wr_error_set(
		    err, EBADMSG, "skipped %d corrupt manifest%s: %s%s",
		    c.skipped, c.skipped == 1 ? "" : "s",
		    c.warning ? c.warning : "", c.skipped > 3 ? "; ..." : "");
	free(c.warning);
	*out = c.items;
	*n_out = c.n;
	return c.skipped;
}

int snap_store_remove(struct snap_store *s, const char *id,
		      struct wr_error **err)
{
	_cleanup_unlock_ struct snap_store *locked = NULL;
	int r = store_lock(s, err);
	if (r < 0)
		return r;
	locked = s;
	char full[SNAP_ID_LEN + 1];
	if ((r = resolve_id(s, id, full, err)) < 0)
		return r;
	char name[SNAP_ID_LEN + sizeof(MANIFEST_SUFFIX)];
	snprintf(name, sizeof(name), "%s" MANIFEST_SUFFIX, full);
	if (unlinkat(s->snaps_fd, name, 0) < 0) {
		if (errno == ENOENT)
			return wr_error_absent(err, true, "no snapshot %s",
					      full);
		return wr_error_set(err, errno, "remove %s/%s", s->snaps_dir,
				    name);
	}
	if (fsync(s->snaps_fd) < 0)
		return wr_error_set(err, errno, "sync %s", s->snaps_dir);
	return 0;
}

/* ---- verify ------------------------------------------------------------- */

void snap_verify_result_clear(struct snap_verify_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; res->bad_ids && i < res->n_bad; i++)
		free(res->bad_ids[i]);
	free(res->bad_ids);
	memset(res, 0, sizeof(*res));
}

int snap_store_verify(struct snap_store *s, const char *id,
		      struct snap_verify_result *res, struct wr_error **err)
{
	char full[SNAP_ID_LEN + 1];
	int r = resolve_id(s, id, full, err);
	if (r < 0)
		return r;
	_cleanup_(manifest_freep) struct snap_manifest *m = NULL;
	if ((r = load_manifest(s, full, &m, err)) < 0)
		return r;
	struct snap_verify_result out = {.n_layers = m->n_layers};
	if (m->n_layers &&
	    !(out.bad_ids = wr_calloc(m->n_layers, sizeof(char *))))
		return wr_error_set(err, ENOMEM, "verify snapshot %s", full);
	for (size_t i = 0; i < m->n_layers; i++) {
		const char *want = m->layers[i].id;
		char got[SNAP_ID_LEN + 1] = "";
		_cleanup_free_ char *path = snap_store_layer_path(s, want);
		if (!path) {
			r = wr_error_set(err, ENOMEM, "verify snapshot %s",
					 full);
			break;
		}
		/* no lock: layers are immutable, and a layer gc removes
		 * meanwhile is reported missing, as it then is */
		struct wr_error *lerr = NULL;
		r = snap_layer_hash(path, got, NULL, &lerr);
		if (r == -ENOENT || r == -ENOTDIR) {
			got[0] = '\0';
			r = 0;
		}
		if (r < 0) {
			if (err && !*err)
				*err = TAKE_PTR(lerr);
			wr_error_free(lerr);
			wr_error_wrap(err, "verify snapshot %s", full);
			break;
		}
		wr_error_free(lerr);
		if (!strcmp(got, want))
			continue;
		out.bad_ids[out.n_bad] = wr_strdup(want);
		if (!out.bad_ids[out.n_bad]) {
			r = wr_error_set(err, ENOMEM, "verify snapshot %s",
					 full);
			break;
		}
		out.n_bad++;
	}
	if (r < 0) {
		snap_verify_result_clear(&out);
		return r;
	}
	*res = out;
	return 0;
}

/* ---- gc ----------------------------------------------------------------- */

static int id_set_add(struct id_set *set, const char *id)
{
	if (set->n == set->cap) {
		if (set->cap >= STORE_MAX_IDS)
			return -E2BIG;
		size_t cap = set->cap ? set->cap * 2 : 64;
		char(*grown)[SNAP_ID_LEN + 1] =
		    wr_realloc(set->ids, cap * sizeof(*set->ids));
		if (!grown)
			return -ENOMEM;
		set->ids = grown;
		set->cap = cap;
	}
	memcpy(set->ids[set->n++], id, SNAP_ID_LEN + 1);
	return 0;
}

static int cmp_ids(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool id_set_has(const struct id_set *set, const char *id)
{
	return set->n &&
	       bsearch(id, set->ids, set->n, sizeof(*set->ids), cmp_ids);
}

/* Every run of exactly 64 lowercase hex digits in text. */
static int add_ids_in_text(struct id_set *set, const char *text)
{
	for (const char *p = text; *p;) {
		size_t run = 0;
		while (is_lower_hex(p[run]))
			run++;
		if (run == SNAP_ID_LEN) {
			char id[SNAP_ID_LEN + 1];
			memcpy(id, p, SNAP_ID_LEN);
			id[SNAP_ID_LEN] = '\0';
			int r = id_set_add(set, id);
			if (r < 0)
				return r;
		}
		p += run ? run : 1;
	}
	return 0;
}

struct keep_ctx {
	const struct snap_store *s;
	struct id_set *keep;
	struct wr_error **err;
};

static int keep_manifest_layers(const char *id, void *arg)
{
	struct keep_ctx *c = arg;
	_cleanup_(manifest_freep) struct snap_manifest *m = NULL;
	struct wr_error *lerr = NULL;
	int r = load_manifest(c->s, id, &m, &lerr);
	wr_error_free(lerr);
	if (r == -ENOENT)
		return 0;
	if (r == -EBADMSG) {
		/* what it references is unknown: keep whatever it names */
		char name[SNAP_ID_LEN + sizeof(MANIFEST_SUFFIX)];
		snprintf(name, sizeof(name), "%s" MANIFEST_SUFFIX, id);
		_cleanup_free_ char *text = NULL;
		r = read_at(c->s->snaps_fd, name, MANIFEST_MAX_BYTES, &text,
			    NULL);
		if (r == -EFBIG || r == -ENOENT)
			return 0;
		if (r == 0)
			r = add_ids_in_text(c->keep, text);
	} else if (r == 0) {
		for (size_t i = 0; r == 0 && i < m->n_layers; i++)
			r = id_set_add(c->keep, m->layers[i].id);
	}
	if (r < 0)
		return wr_error_set(c->err, -r, "gc: read manifest %s", id);
	return 0;
}

/* The pins of every live handle, from their lease files. */
static int keep_leased(const struct snap_store *s, struct id_set *keep)
{
	_cleanup_closedir_ DIR *dir = wr_opendir_at(s->tmp_fd);
	if (!dir)
		return -errno;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, LEASE_PREFIX, strlen(LEASE_PREFIX)))
			continue;
		_cleanup_close_ int fd = openat(
		    s->tmp_fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			continue; /* its handle is gone */
		_cleanup_free_ char *text = NULL;
		int r =
		    read_at(s->tmp_fd, de->d_name,
			    STORE_MAX_PINS * (SNAP_ID_LEN + 1), &text, NULL);
		if (r == -ENOENT)
			continue;
		if (r < 0 || (r = add_ids_in_text(keep, text)) < 0)
			return r;
	}
	return 0;
}

struct trash {
	char name[NAME_MAX + 1]; /* under DATA/tmp */
	int fd;			 /* flocked: sweepers leave it alone */
};

/* Moves layers/<id> to DATA/tmp, where it is deleted outside the lock. */
static int move_to_trash(struct snap_store *s, const char *id, struct trash *t)
{
	unsigned char rnd[8];
	char hex[2 * sizeof(rnd) + 1];
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(hex, sizeof(hex), rnd, sizeof(rnd));
	snprintf(t->name, sizeof(t->name), "trash.%s", hex);
	if (renameat(s->layers_fd, id, s->tmp_fd, t->name) < 0)
		return -errno;
	t->fd = openat(s->tmp_fd, t->name,
		       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->fd >= 0 && flock(t->fd, LOCK_EX | LOCK_NB) < 0) {
		close(t->fd);
		t->fd = -1;
	}
	return 0;
}

/* Layers not in keep and, when only is given, in only. */
static int find_garbage(struct snap_store *s, const struct id_set *keep,
			const struct id_set *only, struct id_set *doomed)
{
	_cleanup_closedir_ DIR *dir = wr_opendir_at(s->layers_fd);
	if (!dir)
		return -errno;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(dir))) {
		if (snap_id_valid(de->d_name) &&
		    !id_set_has(keep, de->d_name) &&
		    (!only || id_set_has(only, de->d_name))) {
			int r = id_set_add(doomed, de->d_name);
			if (r < 0)
				return r;
		}
		errno = 0;
	}
	return errno ? -errno : 0;
}

/* Removes keys that name no layer (or nothing sensible). */
static int drop_dangling_keys(struct snap_store *s)
{
	_cleanup_closedir_ DIR *dir = wr_opendir_at(s->keys_fd);
	if (!dir)
		return -errno;
	bool changed = false;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char id[SNAP_ID_LEN + 1];
		int r = read_key(s, de->d_name, id);
		if (r == -ENOMEM)
			return r;
		if ((r == 0 && layer_exists(s, id)) || r == -EISDIR)
			continue;
		if (unlinkat(s->keys_fd, de->d_name, 0) == 0)
			changed = true;
	}
	return changed && fsync(s->keys_fd) < 0 ? -errno : 0;
}

/* gc, or with only (n_only ids) the eviction of those alone */
static int collect(struct snap_store *s, const char *const *in_use,
		   size_t n_in_use, const char *const *only, size_t n_only,
		   size_t *removed_layers, uint64_t *removed_bytes,
		   struct wr_error **err)
{
	for (size_t i = 0; i < n_in_use; i++)
		if (!snap_id_valid(in_use[i]))
			return wr_error_input(err, EINVAL,
					      "gc: '%s' is not a layer id",
					      in_use[i] ? in_use[i] : "(null)");
	for (size_t i = 0; only && i < n_only; i++)
		if (!snap_id_valid(only[i]))
			return wr_error_input(err, EINVAL,
					      "evict: '%s' is not a layer id",
					      only[i] ? only[i] : "(null)");
	struct id_set keep = {0}, doomed = {0}, chosen = {0};
	struct trash *trash = NULL;
	size_t n_trash = 0;
	int r = 0;
	for (size_t i = 0; r == 0 && i < n_in_use; i++)
		r = id_set_add(&keep, in_use[i]);
	for (size_t i = 0; r == 0 && only && i < n_only; i++)
		r = id_set_add(&chosen, only[i]);
	if (r < 0) {
		free(keep.ids);
		free(chosen.ids);
		return wr_error_set(err, -r, "gc");
	}
	if (chosen.n)
		qsort(chosen.ids, chosen.n, sizeof(*chosen.ids), cmp_ids);
	_cleanup_unlock_ struct snap_store *locked = NULL;
	if ((r = store_lock(s, err)) < 0)
		goto out;
	locked = s;
	sweep_tmp(s);
	struct keep_ctx kc = {.s = s, .keep = &keep, .err = err};
	if ((r = each_manifest(s, keep_manifest_layers, &kc)) < 0) {
		if (!err || !*err)
			r = wr_error_set(err, -r, "gc: list %s", s->snaps_dir);
		goto out;
	}
	if ((r = keep_leased(s, &keep)) < 0) {
		r = wr_error_set(err, -r, "gc: read leases in %s", s->tmp_dir);
		goto out;
	}
	if (keep.n)
		qsort(keep.ids, keep.n, sizeof(*keep.ids), cmp_ids);
	if ((r = find_garbage(s, &keep, only ? &chosen : NULL, &doomed)) < 0) {
		r = wr_error_set(err, -r, "gc: list %s", s->layers_dir);
		goto out;
	}
	if (doomed.n && !(trash = wr_calloc(doomed.n, sizeof(*trash)))) {
		r = wr_error_set(err, ENOMEM, "gc");
		goto out;
	}
	for (size_t i = 0; i < doomed.n; i++) {
		r = move_to_trash(s, doomed.ids[i], &trash[n_trash]);
		if (r < 0) {
			r = wr_error_set(err, -r, "gc: remove layer %s/%s",
					 s->layers_dir, doomed.ids[i]);
			break;
		}
		n_trash++;
	}
	if (n_trash && fsync(s->layers_fd) < 0 && r == 0)
		r = wr_error_set(err, errno, "gc: sync %s", s->layers_dir);
	int kr = drop_dangling_keys(s);
	if (kr < 0 && r == 0)
		r = wr_error_set(err, -kr, "gc: clean keys in %s/.keys",
				 s->layers_dir);
	locked = NULL;
	flock(s->lock_fd, LOCK_UN);
	/* the layers are out of the store already; deleting them (which may
	 * take long) need not hold up publishers */
	uint64_t bytes = 0;
	for (size_t i = 0; i < n_trash; i++) {
		char path[TMP_PATH_MAX];
		tmp_path(s, trash[i].name, path);
		uint64_t size = 0;
		/* the size only informs the report: a failure leaves it out */
		if (snap_layer_size(path, &size, NULL) == 0)
			bytes += size;
		int rr = wr_rm_rf(path);
		if (rr < 0 && r == 0)
			r = wr_error_set(err, -rr, "gc: delete %s", path);
		if (trash[i].fd >= 0)
			close(trash[i].fd);
	}
	if (r == 0) {
		if (removed_layers)
			*removed_layers = n_trash;
		if (removed_bytes)
			*removed_bytes = bytes;
	}
out:
	free(trash);
	free(keep.ids);
	free(chosen.ids);
	free(doomed.ids);
	return r;
}

int snap_store_gc(struct snap_store *s, const char *const *in_use,
		  size_t n_in_use, size_t *removed_layers,
		  uint64_t *removed_bytes, struct wr_error **err)
{
	return collect(s, in_use, n_in_use, NULL, 0, removed_layers,
		       removed_bytes, err);
}

int snap_store_evict(struct snap_store *s, const char *const *in_use,
		     size_t n_in_use, const char *const *ids, size_t n_ids,
		     size_t *removed_layers, uint64_t *removed_bytes,
		     struct wr_error **err)
{
	static const char *const none[1];
	return collect(s, in_use, n_in_use, ids ? ids : none, ids ? n_ids : 0,
		       removed_layers, removed_bytes, err);
}
