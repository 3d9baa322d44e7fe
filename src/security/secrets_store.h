/* secrets_store.h - secrets through the store, so that a secret set on
 * any server reaches every server (docs/deploy.md, "Secrets and the
 * secrets key"; the server's side: it calls the store).
 *
 * The store holds each secret's files as they are on disk: the bytes of
 * DATA/secrets/NAME.enc (ciphertext; the value and the key never leave
 * the hosts) and the text of NAME.repos. Each server's DATA/secrets is a
 * cache of them: the API writes its local files (secrets.h) and then the
 * store's copy; on a store other servers share (PostgreSQL), every server
 * syncs its cache at start and then every SECRETS_SYNC_MS: a row whose
 * bytes differ from the local files is written over them, a deleted one
 * removed, and the secrets of DATA/secrets the store has never heard of
 * (made before the store kept secrets) are imported once, at start. A
 * secret that does not decrypt under this host's key is said in the log
 * once per version (every host needs the same key: secrets_key_file). On
 * a store only this server uses (SQLite) nothing syncs: DATA/secrets is
 * all there is, as before, and the store's copy is only a copy. */
#ifndef WR_SECURITY_SECRETS_STORE_H
#define WR_SECURITY_SECRETS_STORE_H

#include "util/error.h"

#include <stdbool.h>

struct store;

#define SECRETS_SYNC_MS 3000

/* Held by the API around a set or a delete (its local files, then the
 * store's row) and by each sync pass, so that a pass never writes the
 * store's older copy over files the API has just written and not yet
 * stored. */
void secrets_store_lock(void);
void secrets_store_unlock(void);

/* Writes name's local files (DATA/secrets/NAME.enc and NAME.repos) to
 * the store as its live row. -ENOENT if there is no local secret. */
int secrets_store_put(struct store *st, const char *data_dir, const char *name,
		      struct wr_error **err);
/* Marks name deleted in the store; *deleted false when the store had no
 * live row of it. */
int secrets_store_delete(struct store *st, const char *name, bool *deleted,
			 struct wr_error **err);

/* What one sync did. */
struct secrets_sync_stats {
	unsigned written;	/* local files written from the store */
	unsigned removed;	/* local secrets the store deleted */
	unsigned imported;	/* local secrets the store lacked, put there */
	unsigned undecryptable; /* secrets written (or, at start, found)
				 * that do not decrypt here */
};

/* One sync of data_dir with the store (start: the import too, and every
 * secret checked against the key); each secret's failure is logged and
 * the sync goes on. -errno with *err only if the store cannot be read. */
int secrets_sync_once(struct store *st, const char *data_dir, bool start,
		      struct secrets_sync_stats *stats, struct wr_error **err);

/* The sync at start (in the caller's thread), then a thread of its own
 * repeating it every SECRETS_SYNC_MS until secrets_sync_stop. Nothing
 * (*out NULL, 0) on a store that is this server's alone. */
struct secrets_sync;
int secrets_sync_start(struct store *st, const char *data_dir,
		       struct secrets_sync **out, struct wr_error **err);
void secrets_sync_stop(struct secrets_sync *s);

#endif
