/* audit.h - the tamper-evident audit log of sessions.
 *
 * One append-only file per session, DATA/audit/<session>.jsonl (directory
 * 0700, file 0600), one record per line:
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
 * Owns the file format, appends (serialised per session within a process
 * and with flock(2) across processes, each record one write(2) and
 * fdatasync(2)), recovery of a record torn by a crash, verification and
 * export. What is recorded, and when, is the caller's (perimeter/audit.c).
 */
#ifndef WR_SECURITY_AUDIT_H
#define WR_SECURITY_AUDIT_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

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

/* SHA-256 of data as lowercase hex: what details use to name content they
 * do not carry (tool output, prompts). */
void audit_sha256_hex(const void *data, size_t len,
		      char out[AUDIT_HASH_HEX + 1]);

/* Tests: forget the cached chain heads (the next append re-reads). */
void audit_cache_reset(void);

#endif
