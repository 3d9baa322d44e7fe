/* audit.h - the tamper-evident audit log of sessions.
 *
 * Each session's chain lives in the store (store.h's audit_append and
 * audit_list: one row per record, any host reads it), one record a row;
 * the server of an older release wrote it to one append-only file per
 * session, DATA/audit/<session>.jsonl (directory 0700, file 0600), one
 * record per line. Both hold the same records, the same text:
 *
 *   {"actor":"system","details":{...},"hash":"<64 hex>","kind":"state",
 *    "prev":"<64 hex>","seq":3,"session":"s-...","time_ms":1700000000000}
 *
 * in canonical form: jansson JSON_COMPACT | JSON_SORT_KEYS, nested objects
 * sorted too. seq counts 1, 2, 3, ...; actor is "system", "agent" or
 * "user:<name>"; hash is the SHA-256 (hex) of the canonical serialization of
 * the record without "hash"; prev is the previous record's hash, 64 zeros
 * for the first. Editing, deleting or reordering a record breaks the chain
 * at that line, and audit_verify() names the first break.
 *
 * Tamper-evident, not tamper-proof: whoever can rewrite the whole file can
 * recompute every hash, and removing records from the end leaves a shorter
 * valid chain. The head hash (the last record's) is what an operator copies
 * somewhere else to anchor the log; audit_walk() reports it and the CLI
 * checks an anchored hash is still in the chain (docs/security.md, "Audit
 * log").
 *
 * Owns the record format and its hash chain; the chain in the store
 * (audit_store.c: appends, walk, export, the import of an older server's
 * files at start); the file format (appends serialised per session within
 * a process and with flock(2) across processes, each record one write(2)
 * and fdatasync(2); recovery of a record torn by a crash), kept to read,
 * verify, export and import the logs of an existing data directory. What
 * is recorded, and when, is the caller's (perimeter/audit.c).
 */
#ifndef WR_SECURITY_AUDIT_H
#define WR_SECURITY_AUDIT_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

#define AUDIT_HASH_HEX 64
/* One serialized record, newline included, at most (-E2BIG beyond). */
#define AUDIT_LINE_MAX (64 * 1024)
#define AUDIT_KIND_MAX 64
#define AUDIT_ACTOR_MAX 160
#define AUDIT_SESSION_MAX 128

/* The path of a session's log (caller frees); NULL if the id is not a
 * plain name ([A-Za-z0-9._-], no leading dot) or on ENOMEM. */
char *audit_path(const char *data_dir, const char *session_id);
bool audit_session_id_ok(const char *session_id);

/* Appends one record to the session's log, creating it (and DATA/audit)
 * on first use. actor: "system", "agent" or "user:<name>"; kind: 1 to
 * AUDIT_KIND_MAX of [a-z0-9_]; details: an object (NULL: {}), not
 * modified. On the first append to a log in this process the chain
 * continues from the file's last record; a last line torn by a crash is
 * cut off and an "audit_recovered" record says how many bytes went.
 * Returns 0 when the record is on disk, -errno otherwise. */
int audit_append(const char *data_dir, const char *session_id,
		 const char *actor, const char *kind, const json_t *details,
		 struct wr_error **err);

struct audit_verify_result {
	bool ok;	   /* every line intact */
	uint64_t records;  /* intact records before the first break */
	uint64_t line;	   /* the first broken line (from 1), 0 if ok */
	char problem[256]; /* "line 7: hash mismatch (edited?)", "" if ok */
	char head[AUDIT_HASH_HEX + 1];	 /* the last intact record's hash */
	char session[AUDIT_SESSION_MAX]; /* the session line 1 names */
};

/* Called with each intact record in order (line from 1); a negative
 * return stops the walk and is returned. */
typedef int (*audit_record_fn)(void *ctx, uint64_t line, const json_t *record);

/* Walks the chain of the log at path: each line complete and valid JSON
 * with exactly the eight fields, seq 1, 2, 3, ..., one session, prev the
 * previous record's hash, hash recomputed, the line in canonical form.
 * Stops at the first broken line. Returns 0 and *out whether the chain
 * holds or not; -errno (-ENOENT: no log) if it could not be read. */
int audit_walk(const char *path, audit_record_fn each, void *ctx,
	       struct audit_verify_result *out, struct wr_error **err);
int audit_verify(const char *path, struct audit_verify_result *out,
		 struct wr_error **err);

/* Copies the log at path to out_fd byte for byte (JSON Lines). */
int audit_export(const char *path, int out_fd, struct wr_error **err);

/* ---- records and the chain, wherever they are kept ---- */

/* The canonical text (no newline; caller frees) and hash of the record
 * seq of session_id after prev: the checks audit_append makes of actor,
 * kind and details, -E2BIG past AUDIT_LINE_MAX. */
int audit_record_make(const char *session_id, int64_t seq,
		      const char prev[AUDIT_HASH_HEX + 1], const char *actor,
		      const char *kind, const json_t *details, int64_t time_ms,
		      char **text, char hash[AUDIT_HASH_HEX + 1],
		      struct wr_error **err);
/* The wall clock as records carry it (ms since the epoch). */
int64_t audit_now_ms(void);

/* The checks of audit_walk one record at a time, for a chain read from
 * anywhere: init, then step with each record's text in order (line
 * numbers count from 1); a step returns the record (json_decref it), or
 * NULL at the first broken one with w->res saying why. w->res is the
 * result so far. */
struct audit_walker {
	struct audit_verify_result res;
	char prev[AUDIT_HASH_HEX + 1];
};
void audit_walker_init(struct audit_walker *w);
json_t *audit_walker_step(struct audit_walker *w, const char *text, size_t len);

/* ---- the chain in the store (audit_store.c, the server's side) ---- */

/* Appends a record to the session's chain in the store, checked as
 * audit_append's, the head read and the record inserted in one store
 * transaction (two appenders never fork the chain). epoch: the session's
 * lease epoch the writer holds, -ESTALE if the store's is another (0: no
 * check). Returns 0 when the record is committed, -errno otherwise. */
int audit_store_append(struct store *st, const char *session_id, int64_t epoch,
		       const char *actor, const char *kind,
		       const json_t *details, struct wr_error **err);
/* audit_walk over the store's chain of session_id ("line N": the Nth
 * record by seq, the Nth line of its export); -ENOENT when the store has
 * no record of the session (an unknown one included). */
int audit_store_walk(struct store *st, const char *session_id,
		     audit_record_fn each, void *ctx,
		     struct audit_verify_result *out, struct wr_error **err);
/* Writes the store's chain of session_id to out_fd, JSON Lines, each
 * record's text as stored; -ENOENT as audit_store_walk. */
int audit_store_export(struct store *st, const char *session_id, int out_fd,
		       struct wr_error **err);
/* Moves the logs an older server wrote (DATA/audit/<id>.jsonl) into the
 * store: each one whose session the store knows and has no record of,
 * with its chain intact, is imported as it is (the same text, so the same
 * hashes) and renamed <id>.jsonl.imported. A log that is broken, or of a
 * session the store does not know, stays where it is (`warren audit
 * verify` still reads it while the store has no record of the session);
 * *skipped counts them. Returns the number imported, or -errno when
 * DATA/audit cannot be read; a log's own failure is in *skipped only,
 * the first one's message in *err. */
int audit_store_import_dir(struct store *st, const char *data_dir,
			   size_t *skipped, struct wr_error **err);

/* SHA-256 of data as lowercase hex: what details use to name content they
 * do not carry (tool output, prompts). */
void audit_sha256_hex(const void *data, size_t len,
		      char out[AUDIT_HASH_HEX + 1]);

/* Tests: forget the cached chain heads (the next append re-reads). */
void audit_cache_reset(void);

#endif
