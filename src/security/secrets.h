/* secrets.h - named secrets, encrypted at rest (docs/security.md,
 * "Secrets").
 *
 * A store of named values under the data directory:
 *
 *   DATA/secrets.key        32 random bytes, created on first use (0400,
 *                           owned by us, refused if group or others may
 *                           read it)
 *   DATA/secrets/           0700
 *   DATA/secrets/NAME.enc   one secret: header || nonce || ciphertext
 *
 * Each file is XChaCha20-Poly1305 (libsodium's IETF AEAD) of the value
 * under the key, with a random 24-byte nonce and, as associated data, the
 * file's header and the secret's name: a file copied over another name's,
 * an edited header or ciphertext, or another store's key all fail to
 * decrypt. Files are replaced atomically (a new file, fsync, rename).
 *
 * Names are [A-Z_][A-Z0-9_]* (the spec's rule for customizations.warren.
 * secrets), at most SECRETS_NAME_MAX bytes; values are 1 to
 * SECRETS_VALUE_MAX bytes without NUL (they become environment variables).
 * Listing reads the headers only: it never decrypts. Values handed out are
 * the caller's to wipe (secrets_value_free, secret_set_clear).
 *
 * Also here, for the snapshot builder that injects secrets into hooks:
 * loading the secrets a spec names, finding their values in a directory
 * tree (a layer about to be published) and redacting them from text. */
#ifndef WR_SECURITY_SECRETS_H
#define WR_SECURITY_SECRETS_H

#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SECRETS_NAME_MAX 64
#define SECRETS_VALUE_MAX (64 * 1024)
#define SECRETS_MAX 1024 /* secrets in one store */
#define SECRETS_KEY_BYTES 32
/* Values shorter than this are not looked for in layers nor redacted
 * from build output: a short value would match unrelated bytes. */
#define SECRETS_SCAN_MIN 8

struct secret_info {
	char name[SECRETS_NAME_MAX + 1];
	int64_t created_ms; /* epoch ms of the first set */
	int64_t updated_ms; /* of the last set */
};

/* Is name a valid secret name? */
bool secrets_name_valid(const char *name);

/* Stores value under name, replacing any previous value; creates the
 * directory and the key on first use. *out (if not NULL) gets the name and
 * times. Bad names or values are input errors (-EINVAL); -ENOSPC when the
 * store already holds SECRETS_MAX secrets. */
int secrets_set(const char *data_dir, const char *name, const void *value,
		size_t len, struct secret_info *out, struct wr_error **err);
/* The value of name (NUL-terminated, *len without the NUL); free it with
 * secrets_value_free. -ENOENT if there is no such secret (or no store);
 * -EBADMSG if it does not decrypt (wrong key, altered or moved file);
 * -EPERM for a key file or directory others may read. */
int secrets_get(const char *data_dir, const char *name, char **value,
		size_t *len, struct wr_error **err);
/* Wipes and frees a value from secrets_get (NULL is fine). */
void secrets_value_free(char *value, size_t len);
/* Every secret's name and times (never values), sorted by name; *out is
 * NULL when there are none. Caller frees *out. */
int secrets_list(const char *data_dir, struct secret_info **out, size_t *n,
		 struct wr_error **err);
/* Removes name; -ENOENT if there is no such secret. */
int secrets_delete(const char *data_dir, const char *name,
		   struct wr_error **err);

/* The key every secret is encrypted under: DATA/secrets.key, unless the
 * server's configuration names a file (secrets_key_file: an absolute
 * path, the same checks as DATA/secrets.key; never created), which
 * secrets_use_key_file sets for the whole process, once at start before
 * any thread uses the secrets. -EPERM, -EINVAL, -ENOENT (input errors)
 * for a file that cannot be the key. */
int secrets_use_key_file(const char *path, struct wr_error **err);
/* The configured key file, or NULL: DATA/secrets.key. */
const char *secrets_key_file(void);
/* 0 if name decrypts under this process's key (the value is wiped at
 * once); secrets_get's errors otherwise (-EBADMSG: another key). */
int secrets_check(const char *data_dir, const char *name,
		  struct wr_error **err);

/* The files of a secret as they are, for copying between data
 * directories (secrets_store.c): *file the bytes of NAME.enc, *repos the
 * text of NAME.repos or NULL (caller frees both). -ENOENT if there is
 * no such secret. */
int secrets_file_read(const char *data_dir, const char *name,
		      unsigned char **file, size_t *file_len, char **repos,
		      struct wr_error **err);
/* Writes them (the list, or its removal, first; each file atomically,
 * 0600, in the 0700 directory), after checking that file looks like a
 * secret's file and repos like a list (-EBADMSG). Decrypting is not
 * tried: secrets_check. */
int secrets_file_write(const char *data_dir, const char *name,
		       const unsigned char *file, size_t file_len,
		       const char *repos, struct wr_error **err);

/* The secrets a spec declares, with their values. */
struct secret_value {
	char *name;
	char *value; /* NUL-terminated */
	size_t len;
};
struct secret_set {
	struct secret_value *v;
	size_t n;
};

/* Which repositories' snapshot builds a secret goes to: DATA/secrets/
 * NAME.repos, a JSON array of repository names (as registered with warren
 * serve), or no file: any repository. Names are 1 to
 * SECRETS_REPO_NAME_MAX of [A-Za-z0-9._-], not starting with '.'. */
#define SECRETS_REPOS_MAX 256
#define SECRETS_REPO_NAME_MAX 128
bool secrets_repo_name_valid(const char *name);
/* *repos (n entries, free with secrets_repos_free) is NULL with n 0 when
 * any repository may have it. -EBADMSG if the file is not such a list. */
int secrets_repos_get(const char *data_dir, const char *name, char ***repos,
		      size_t *n, struct wr_error **err);
/* Sets the list (n 0: any repository again). -ENOENT if there is no
 * secret called name; -EINVAL for a bad repository name or more than
 * SECRETS_REPOS_MAX. */
int secrets_repos_set(const char *data_dir, const char *name,
		      char *const *repos, size_t n, struct wr_error **err);
void secrets_repos_free(char **repos, size_t n);

/* Loads the named secrets (duplicates once) for a build of repository
 * repo_name (NULL: a build that names none). A name with no secret fails
 * the whole load with one input error naming every missing one; a secret
 * whose list of repositories does not hold repo_name fails it too. On
 * failure *out is left empty. */
int secrets_load(const char *data_dir, char *const *names, size_t n_names,
		 const char *repo_name,
		 struct secret_set *out, struct wr_error **err);
/* Wipes every value and frees the set (it is then empty). */
void secret_set_clear(struct secret_set *s);

/* Looks for the values of s (those of at least SECRETS_SCAN_MIN bytes) in
 * the tree under dir: the contents of regular files, the targets of
 * symbolic links and the names of entries, without following links or
 * crossing mounts. 0 if none is found; 1 if one is, with the secret's name
 * in *name and the entry's path relative to dir in *path (caller frees
 * both); -errno with *err if the tree cannot be read. */
int secrets_find_in_tree(const char *dir, const struct secret_set *s,
			 char **name, char **path, struct wr_error **err);

/* Replaces, in place, every occurrence in the NUL-terminated text of a
 * value of s (those of at least SECRETS_SCAN_MIN bytes) with "***".
 * Returns how many were replaced. */
size_t secrets_redact(char *text, const struct secret_set *s);

#endif
