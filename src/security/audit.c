/* audit.c - the audit chain: append (with recovery of a torn last record),
 * verify, export. The format is in audit.h. */
#include "security/audit.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* Records of actions outside Warren: flushed before the append returns.
 * "broker": the credential broker's calls, which push to the remote with
 * its credentials. */
static bool audit_kind_durable(const char *kind)
{
	static const char *const external[] = {
	    "push", "pull_request", "decision", "credential", "broker"};
	for (size_t i = 0; i < sizeof(external) / sizeof(external[0]); i++)
		if (!strcmp(kind, external[i]))
			return true;
	return false;
}

/* The cached head of a chain: which log, what the file looked like after
 * our last append (so another writer, or an edit, is noticed), and the
 * last record's seq and hash. Logs share a stripe by hash of their path;
 * a stripe's mutex serialises appends to its logs within this process,
 * flock(2) on the file serialises them across processes. */
#define HEAD_STRIPES 128

struct chain_head {
	pthread_mutex_t mu;
	char *path; /* NULL: nothing cached */
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t seq;
	char hash[AUDIT_HASH_HEX + 1];
};

static struct chain_head heads[HEAD_STRIPES];
static pthread_once_t heads_once = PTHREAD_ONCE_INIT;

static void heads_init(void)
{
	for (size_t i = 0; i < HEAD_STRIPES; i++)
		pthread_mutex_init(&heads[i].mu, NULL);
}

static struct chain_head *head_for(const char *path)
{
	pthread_once(&heads_once, heads_init);
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 16777619u;
	return &heads[h % HEAD_STRIPES];
}

void audit_cache_reset(void)
{
	pthread_once(&heads_once, heads_init);
	for (size_t i = 0; i < HEAD_STRIPES; i++) {
		pthread_mutex_lock(&heads[i].mu);
		free(heads[i].path);
		heads[i].path = NULL;
		pthread_mutex_unlock(&heads[i].mu);
	}
}

/* ---- names and hashes -----------------------------------------------------
 */

static void zero_hash(char out[AUDIT_HASH_HEX + 1])
{
	memset(out, '0', AUDIT_HASH_HEX);
	out[AUDIT_HASH_HEX] = '\0';
}

static bool hex_ok(const char *s)
{
	if (!s || strlen(s) != AUDIT_HASH_HEX)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

void audit_sha256_hex(const void *data, size_t len,
		      char out[AUDIT_HASH_HEX + 1])
{
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, data, len);
	sodium_bin2hex(out, AUDIT_HASH_HEX + 1, digest, sizeof(digest));
}

bool audit_session_id_ok(const char *id)
{
	if (!id || !*id || id[0] == '.' || strlen(id) >= AUDIT_SESSION_MAX)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		      *p == '.'))
			return false;
	return true;
}

static bool actor_ok(const char *actor)
{
	if (!actor)
		return false;
	if (!strcmp(actor, "system") || !strcmp(actor, "agent"))
		return true;
	size_t len = strlen(actor);
	if (strncmp(actor, "user:", 5) || len == 5 || len > AUDIT_ACTOR_MAX)
		return false;
	for (const unsigned char *p = (const unsigned char *)actor; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static bool kind_ok(const char *kind)
{
	if (!kind || !*kind || strlen(kind) > AUDIT_KIND_MAX)
		return false;
	for (const char *p = kind; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_'))
			return false;
	return true;
}

char *audit_path(const char *data_dir, const char *session_id)
{
	if (!data_dir || !audit_session_id_ok(session_id))
		return NULL;
	return wr_asprintf("%s/audit/%s.jsonl", data_dir, session_id);
}

/* The canonical serialization: compact, every object's keys sorted. */
static char *canonical(const json_t *record)
{
	return json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);
}

/* The hash of a record without its "hash" field. */
static int record_hash(const json_t *record, char out[AUDIT_HASH_HEX + 1])
{
	_cleanup_free_ char *text = canonical(record);
	if (!text)
		return -ENOMEM;
	audit_sha256_hex(text, strlen(text), out);
	return 0;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- append ------------------------------------------------------------- */

/* Opens (creating it and DATA/audit the first time) a session's log for
 * appending; also readable, for the tail. */
static int open_log(const char *data_dir, const char *path,
		    struct wr_error **err)
{
	int flags = O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
	int fd = open(path, flags);
	if (fd < 0 && errno == ENOENT) {
		_cleanup_free_ char *dir = wr_asprintf("%s/audit", data_dir);
		if (!dir)
			return wr_error_set(err, ENOMEM, "audit log");
		int r = wr_mkdir_p(dir, 0700);
		if (r < 0)
			return wr_error_set(err, -r, "create %s", dir);
		fd = open(path, flags | O_CREAT, 0600);
		if (fd >= 0) {
			/* the new name must outlive a crash as the records
			 * in it do */
			int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0) {
				fsync(dfd);
				close(dfd);
			}
		}
	}
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", path);
	return fd;
}

struct torn {
	off_t bytes; /* cut off the end, 0 if none */
	char sha[AUDIT_HASH_HEX + 1];
};

static int read_at(int fd, char *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than fstat said */
		done += (size_t)n;
	}
	return 0;
}

/* Where the chain in a log of size bytes ends: the last record's seq and
 * hash, read from the tail (a record is at most AUDIT_LINE_MAX, so the
 * last complete line and a torn one after it fit in twice that). A torn
 * last line (a crash mid-write) is cut off and described in *torn. */
static int load_head(int fd, const char *path, off_t size, int64_t *seq,
		     char hash[AUDIT_HASH_HEX + 1], struct torn *torn,
		     struct wr_error **err)
{
	*seq = 0;
	zero_hash(hash);
	torn->bytes = 0;
	if (size == 0)
		return 0;
	size_t want = 2 * (size_t)AUDIT_LINE_MAX + 2;
	off_t off = size > (off_t)want ? size - (off_t)want : 0;
	size_t len = (size_t)(size - off);
	_cleanup_free_ char *buf = wr_malloc(len);
	if (!buf)
		return wr_error_set(err, ENOMEM, "read %s", path);
	int r = read_at(fd, buf, len, off);
	if (r < 0)
		return wr_error_set(err, -r, "read %s", path);
	size_t end = len; /* just after the last complete line */
	if (buf[len - 1] != '\n') {
		char *nl = memrchr(buf, '\n', len);
		if (!nl && off > 0)
			return wr_error_set(err, EBADMSG,
					    "%s: no complete record in its "
					    "last %zu bytes",
					    path, len);
		end = nl ? (size_t)(nl - buf) + 1 : 0;
		torn->bytes = (off_t)(len - end);
		audit_sha256_hex(buf + end, len - end, torn->sha);
		if (ftruncate(fd, off + (off_t)end) < 0 || fdatasync(fd) < 0)
			return wr_error_set(err, errno,
					    "%s: cut off the torn last record",
					    path);
		if (end == 0)
			return 0; /* the torn record was the only one */
	}
	size_t stop = end - 1; /* the last line's newline */
	char *nl = stop ? memrchr(buf, '\n', stop) : NULL;
	if (!nl && off > 0)
		return wr_error_set(err, EBADMSG, "%s: last record too long",
				    path);
	size_t start = nl ? (size_t)(nl - buf) + 1 : 0;
	json_t *rec = json_loadb(buf + start, stop - start, 0, NULL);
	json_t *s = json_object_get(rec, "seq");
	const char *h = json_string_value(json_object_get(rec, "hash"));
	bool ok = json_is_integer(s) && json_integer_value(s) >= 1 && hex_ok(h);
	if (ok) {
		*seq = json_integer_value(s);
		memcpy(hash, h, AUDIT_HASH_HEX + 1);
	}
	json_decref(rec);
	if (!ok)
		return wr_error_set(err, EBADMSG,
				    "%s: the last record is unreadable, the "
				    "chain cannot go on (see `warren audit "
				    "verify`)",
				    path);
	return 0;
}

int audit_record_make(const char *session_id, int64_t seq,
		      const char prev[AUDIT_HASH_HEX + 1], const char *actor,
		      const char *kind, const json_t *details, int64_t time_ms,
		      char **text, char hash[AUDIT_HASH_HEX + 1],
		      struct wr_error **err)
{
	if (!actor_ok(actor))
		return wr_error_input(err, EINVAL, "audit: bad actor '%s'",
				      actor ? actor : "");
	if (!kind_ok(kind))
		return wr_error_input(err, EINVAL, "audit: bad kind '%s'",
				      kind ? kind : "");
	if (details && !json_is_object(details))
		return wr_error_input(err, EINVAL,
				      "audit: details must be an object");
	if (!audit_session_id_ok(session_id))
		return wr_error_input(err, EINVAL, "audit: bad session id '%s'",
				      session_id ? session_id : "");
	json_t *empty = details ? NULL : json_object();
	json_t *rec =
	    json_pack("{s:I, s:I, s:s, s:s, s:s, s:O, s:s}", "seq",
		      (json_int_t)seq, "time_ms", (json_int_t)time_ms,
		      "session", session_id, "actor", actor, "kind", kind,
		      "details", details ? details : empty, "prev", prev);
	json_decref(empty);
	if (!rec)
		return wr_error_set(err, EINVAL,
				    "audit of %s: record %s: not valid text",
				    session_id, kind);
	char h[AUDIT_HASH_HEX + 1];
	char *line = NULL;
	if (record_hash(rec, h) == 0 &&
	    json_object_set_new(rec, "hash", json_string(h)) == 0)
		line = canonical(rec);
	json_decref(rec);
	if (!line)
		return wr_error_set(err, ENOMEM, "audit of %s: record %s",
				    session_id, kind);
	if (strlen(line) + 1 > AUDIT_LINE_MAX) {
		free(line);
		return wr_error_set(err, E2BIG,
				    "audit of %s: record %s longer than %d "
				    "bytes",
				    session_id, kind, AUDIT_LINE_MAX);
	}
	*text = line;
	memcpy(hash, h, sizeof(h));
	return 0;
}

int64_t audit_now_ms(void)
{
	return wall_ms();
}

/* Writes the record after h's head and moves the head on. */
static int append_record(int fd, const char *path, struct chain_head *h,
			 const char *session_id, const char *actor,
			 const char *kind, const json_t *details,
			 struct wr_error **err)
{
	char hash[AUDIT_HASH_HEX + 1];
	_cleanup_free_ char *line = NULL;
	int r = audit_record_make(session_id, h->seq + 1, h->hash, actor, kind,
				  details, wall_ms(), &line, hash, err);
	if (r < 0)
		return r;
	size_t len = strlen(line);
	char *grown = wr_realloc(line, len + 2);
	if (!grown)
		return wr_error_set(err, ENOMEM, "%s: record %s", path, kind);
	line = grown;
	line[len++] = '\n';
	line[len] = '\0';
	/* One write(2) of the whole line: O_APPEND puts it at the end in one
	 * piece, and a crash leaves at most a prefix of it (a torn line the
	 * next append cuts off). */
	ssize_t n = write(fd, line, len);
	if (n != (ssize_t)len) {
		int e = n < 0 ? errno : ENOSPC;
		/* leave no torn record behind */
		if (n > 0 && ftruncate(fd, h->size) < 0)
			free(TAKE_PTR(h->path)); /* re-read the tail */
		return wr_error_set(err, e, "write %s", path);
	}
	/* Durability: as durable as the store it sits beside. The store
	 * (SQLite, WAL, synchronous=NORMAL) survives a crash of the server
	 * but may lose its last transactions to a power loss; so does this
	 * log, which the kernel writes back on its own. What happens
	 * outside Warren cannot be taken back by a power loss: a push, a
	 * pull request, a reviewer's decision, a credential handed out. A
	 * log that lost those would lie by omission, so their records are
	 * flushed (fdatasync: the data and the size, not the timestamps)
	 * before the append returns. The rest stays off the session's start
	 * path (a flush costs 0.4-1.5 ms here). */
	if (audit_kind_durable(kind) && fdatasync(fd) < 0) {

		free(TAKE_PTR(h->path));
		return wr_error_set(err, errno, "fdatasync %s", path);
	}
	h->seq++;
	memcpy(h->hash, hash, sizeof(hash));
	h->size += (off_t)len;
	return 0;
}

int audit_append(const char *data_dir, const char *session_id,
		 const char *actor, const char *kind, const json_t *details,
		 struct wr_error **err)
{
	if (!actor_ok(actor))
		return wr_error_input(err, EINVAL, "audit: bad actor '%s'",
				      actor ? actor : "");
	if (!kind_ok(kind))
		return wr_error_input(err, EINVAL, "audit: bad kind '%s'",
				      kind ? kind : "");
	if (details && !json_is_object(details))
		return wr_error_input(err, EINVAL,
				      "audit: details must be an object");
	_cleanup_free_ char *path = audit_path(data_dir, session_id);
	if (!path)
		return audit_session_id_ok(session_id)
			   ? wr_error_set(err, ENOMEM, "audit")
			   : wr_error_input(err, EINVAL,
					    "audit: bad session id '%s'",
					    session_id ? session_id : "");
	json_t *empty = details ? NULL : json_object();
	if (!details && !empty)
		return wr_error_set(err, ENOMEM, "audit");
	struct chain_head *h = head_for(path);
	int r;
	pthread_mutex_lock(&h->mu);
	int fd = open_log(data_dir, path, err);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	struct stat st;
	if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
		r = wr_error_set(err, errno, "lock %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = wr_error_set(err, EINVAL, "%s: not a regular file", path);
		goto out;
	}
	/* the cached head holds if the file is the one we appended to last,
	 * as long as we left it; else the file's tail says where it is */
	if (!h->path || strcmp(h->path, path) || h->dev != st.st_dev ||
	    h->ino != st.st_ino || h->size != st.st_size) {
		free(TAKE_PTR(h->path));
		struct torn torn;
		r = load_head(fd, path, st.st_size, &h->seq, h->hash, &torn,
			      err);
		if (r < 0)
			goto out;
		h->path = wr_strdup(path);
		if (!h->path) {
			r = wr_error_set(err, ENOMEM, "audit");
			goto out;
		}
		h->dev = st.st_dev;
		h->ino = st.st_ino;
		h->size = st.st_size - torn.bytes;
		if (torn.bytes) {
			json_t *d = json_pack(
			    "{s:s, s:I, s:s}", "reason",
			    "the last record was torn (a crash mid-write) and "
			    "was cut off",
			    "dropped_bytes", (json_int_t)torn.bytes,
			    "dropped_sha256", torn.sha);
			r = d ? append_record(fd, path, h, session_id, "system",
					      "audit_recovered", d, err)
			      : wr_error_set(err, ENOMEM, "audit");
			json_decref(d);
			if (r < 0)
				goto out;
		}
	}
	r = append_record(fd, path, h, session_id, actor, kind,
			  details ? details : empty, err);
out:
	if (fd >= 0)
		close(fd); /* and the flock with it */
	pthread_mutex_unlock(&h->mu);
	json_decref(empty);
	return r;
}

/* ---- verify ---------------------------------------------------------------
 */

/* Opens a log for reading and tells how many bytes it holds: taken under
 * a shared lock, so no append is half-way; readers stop there and let the
 * appends go on meanwhile (a slow reader never holds up the server). */
static int open_for_reading(const char *path, off_t *size,
			    struct wr_error **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", path);
	struct stat st;
	int r = 0;
	if (flock(fd, LOCK_SH) < 0 || fstat(fd, &st) < 0)
		r = wr_error_set(err, errno, "%s", path);
	else if (!S_ISREG(st.st_mode))
		r = wr_error_set(err, EINVAL, "%s: not a regular file", path);
	flock(fd, LOCK_UN);
	if (r < 0) {
		close(fd);
		return r;
	}
	*size = st.st_size;
	return fd;
}

#define PROBLEM(res, ...) \
	snprintf((res)->problem, sizeof((res)->problem), __VA_ARGS__)

static const char *const record_fields[] = {
    "actor", "details", "hash", "kind", "prev", "seq", "session", "time_ms",
};

/* Checks one line (text[0..len), newline excluded) against the chain so
 * far; returns the record, or NULL with res->problem set. */
static json_t *check_line(const char *text, size_t len, uint64_t line,
			  const char prev[AUDIT_HASH_HEX + 1],
			  struct audit_verify_result *res)
{
	unsigned long long ln = (unsigned long long)line;
	_cleanup_free_ char *canon = NULL;
	json_error_t jerr;
	json_t *rec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(rec)) {
		json_decref(rec);
		PROBLEM(res, "line %llu: not a JSON object (edited?)", ln);
		return NULL;
	}
	const char *key;
	json_t *v;
	json_object_foreach(rec, key, v)
	{
		bool known = false;
		for (size_t i = 0; i < ARRAY_SIZE(record_fields); i++)
			known = known || !strcmp(key, record_fields[i]);
		if (!known) {
			PROBLEM(res, "line %llu: unexpected field '%.40s'", ln,
				key);
			goto bad;
		}
	}
	json_t *seq = json_object_get(rec, "seq");
	json_t *time_ms = json_object_get(rec, "time_ms");
	const char *session =
	    json_string_value(json_object_get(rec, "session"));
	const char *actor = json_string_value(json_object_get(rec, "actor"));
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	const char *p = json_string_value(json_object_get(rec, "prev"));
	const char *hash = json_string_value(json_object_get(rec, "hash"));
	if (!json_is_integer(seq) || !json_is_integer(time_ms) ||
	    !audit_session_id_ok(session) || !actor_ok(actor) ||
	    !kind_ok(kind) ||
	    !json_is_object(json_object_get(rec, "details")) || !hex_ok(p) ||
	    !hex_ok(hash)) {
		PROBLEM(res, "line %llu: a field is missing or malformed", ln);
		goto bad;
	}
	long long want = (long long)res->records + 1;
	if (json_integer_value(seq) != want) {
		if (line == 1)
			PROBLEM(res,
				"line 1: seq %lld, but a log starts at 1 "
				"(deleted or reordered?)",
				(long long)json_integer_value(seq));
		else
			PROBLEM(res,
				"line %llu: seq %lld follows %lld (deleted or "
				"reordered?)",
				ln, (long long)json_integer_value(seq),
				want - 1);
		goto bad;
	}
	if (line == 1)
		snprintf(res->session, sizeof(res->session), "%s", session);
	else if (strcmp(session, res->session)) {
		PROBLEM(res,
			"line %llu: session %.64s, but line 1 names %.64s "
			"(moved from another log?)",
			ln, session, res->session);
		goto bad;
	}
	if (strcmp(p, prev)) {
		if (line == 1)
			PROBLEM(res, "line 1: prev is not the start of a chain "
				     "(records removed from the front?)");
		else
			PROBLEM(res,
				"line %llu: prev does not match line %llu's "
				"hash",
				ln, ln - 1);
		goto bad;
	}
	/* the hash over the record without it, then the line itself must
	 * be that record's canonical form: any byte changed shows */
	json_t *without = json_copy(rec);
	char computed[AUDIT_HASH_HEX + 1];
	int r = without ? json_object_del(without, "hash") : -1;
	if (r == 0)
		r = record_hash(without, computed);
	json_decref(without);
	if (r < 0) {
		PROBLEM(res, "line %llu: out of memory", ln);
		goto bad;
	}
	if (strcmp(computed, hash)) {
		PROBLEM(res, "line %llu: hash mismatch (edited?)", ln);
		goto bad;
	}
	canon = canonical(rec);
	if (!canon || strlen(canon) != len || memcmp(canon, text, len)) {
		PROBLEM(res, "line %llu: not in canonical form (edited?)", ln);
		goto bad;
	}
	return rec;
bad:
	json_decref(rec);
	return NULL;
}

void audit_walker_init(struct audit_walker *w)
{
	memset(w, 0, sizeof(*w));
	w->res.ok = true;
	zero_hash(w->prev);
}

json_t *audit_walker_step(struct audit_walker *w, const char *text, size_t len)
{
	uint64_t line = w->res.records + 1;
	w->res.ok = false;
	w->res.line = line;
	json_t *rec = check_line(text, len, line, w->prev, &w->res);
	if (!rec)
		return NULL;
	const char *hash = json_string_value(json_object_get(rec, "hash"));
	memcpy(w->prev, hash, AUDIT_HASH_HEX + 1);
	memcpy(w->res.head, hash, AUDIT_HASH_HEX + 1);
	w->res.records++;
	w->res.ok = true;
	w->res.line = 0;
	return rec;
}

/* Reads a line of at most cap bytes (newline excluded) from f, not past
 * *left bytes. Returns its length, -1 at the end, -2 if longer than cap;
 * *complete says whether it ended with a newline. */
static long read_line(FILE *f, char *buf, size_t cap, off_t *left,
		      bool *complete)
{
	size_t n = 0;
	*complete = false;
	while (*left > 0) {
		int ch = getc_unlocked(f);
		if (ch == EOF)
			break;
		(*left)--;
		if (ch == '\n') {
			*complete = true;
			return (long)n;
		}
		if (n == cap)
			return -2;
		buf[n++] = (char)ch;
	}
	return n ? (long)n : -1;
}

int audit_walk(const char *path, audit_record_fn each, void *ctx,
	       struct audit_verify_result *out, struct wr_error **err)
{
	off_t left;
	int fd = open_for_reading(path, &left, err);
	if (fd < 0)
		return fd;
	_cleanup_fclose_ FILE *f = fdopen(fd, "r");
	_cleanup_free_ char *buf = wr_malloc(AUDIT_LINE_MAX);
	if (!f || !buf) {
		if (!f)
			close(fd);
		return wr_error_set(err, ENOMEM, "read %s", path);
	}
	struct audit_verify_result res = {.ok = true};
	char prev[AUDIT_HASH_HEX + 1];
	zero_hash(prev);
	for (uint64_t line = 1;; line++) {
		bool complete;
		long n =
		    read_line(f, buf, AUDIT_LINE_MAX - 1, &left, &complete);
		if (n == -1) {
			if (ferror(f))
				return wr_error_set(err, EIO, "read %s", path);
			break;
		}
		unsigned long long ln = (unsigned long long)line;
		res.ok = false;
		res.line = line;
		if (n == -2) {
			PROBLEM(&res, "line %llu: longer than %d bytes", ln,
				AUDIT_LINE_MAX);
			break;
		}
		if (!complete) {
			PROBLEM(&res,
				"line %llu: incomplete, no newline (a torn "
				"write, or cut short)",
				ln);
			break;
		}
		json_t *rec = check_line(buf, (size_t)n, line, prev, &res);
		if (!rec)
			break;
		int r = each ? each(ctx, line, rec) : 0;
		const char *hash =
		    json_string_value(json_object_get(rec, "hash"));
		memcpy(prev, hash, AUDIT_HASH_HEX + 1);
		memcpy(res.head, hash, AUDIT_HASH_HEX + 1);
		json_decref(rec);
		if (r < 0)
			return r;
		res.records++;
		res.ok = true;
		res.line = 0;
	}
	*out = res;
	return 0;
}

int audit_verify(const char *path, struct audit_verify_result *out,
		 struct wr_error **err)
{
	return audit_walk(path, NULL, NULL, out, err);
}

/* ---- export ------------------------------------------------------------- */

int audit_export(const char *path, int out_fd, struct wr_error **err)
{
	off_t left;
	int fd = open_for_reading(path, &left, err);
	if (fd < 0)
		return fd;
	_cleanup_close_ int in = fd;
	char buf[65536];
	while (left > 0) {
		size_t want =
		    left < (off_t)sizeof(buf) ? (size_t)left : sizeof(buf);
		ssize_t n = read(in, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return wr_error_set(err, errno, "read %s", path);
		if (n == 0)
			break;
		left -= n;
		for (ssize_t done = 0; done < n;) {
			ssize_t w =
			    write(out_fd, buf + done, (size_t)(n - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return wr_error_set(err, errno, "write");
			done += w;
		}
	}
	return 0;
}
