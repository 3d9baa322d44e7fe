/* blobs.h - a client of an OCI registry (the distribution API) as a blob
 * store: blobs by digest, streamed in and out of file descriptors; OCI
 * image manifests by tag or digest; tags; deletion of manifests.
 *
 * The module owns the "blobs" configuration (config.c), the registry's
 * auth (auth.c: HTTP basic, the bearer token flow with its challenge
 * parser, tokens cached per scope), manifests as typed structs
 * (manifest.c, pure) and the HTTP calls (client.c, libcurl). Nothing is
 * read whole into memory but manifests, tag lists and error bodies, each
 * capped. Every failure is one message saying what failed, with the
 * registry's own error code and message when it sent one; no errno text
 * (the -errno returned says it). */
#ifndef WR_BLOBS_BLOBS_H
#define WR_BLOBS_BLOBS_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "sha256:" and 64 lowercase hex digits, and the NUL */
#define BLOBS_DIGEST_MAX 72
/* the distribution spec's cap on a repository name */
#define BLOBS_REPOSITORY_MAX 255
/* the caps on what is read into memory */
#define BLOBS_MANIFEST_MAX (4u << 20)
#define BLOBS_ERROR_BODY_MAX (64u << 10)
#define BLOBS_TAGS_MAX 10000
#define BLOBS_LAYERS_MAX 1024

#define BLOBS_MEDIA_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define BLOBS_MEDIA_CONFIG "application/vnd.oci.image.config.v1+json"
#define BLOBS_MEDIA_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define BLOBS_MEDIA_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
/* annotations: at most this many, each key and value at most 1 KiB */
#define BLOBS_ANNOTATIONS_MAX 64

/* ---- configuration (config.c) ------------------------------------------ */

/* "blobs": {"registry": "http(s)://host[:port]", "repository": NAME,
 *           "username": NAME, "password_file": PATH}
 * username and password_file go together. The password file is checked
 * when the configuration is parsed (a regular file, not readable or
 * writable by group or others) and read again at each use, so a rotated
 * password is picked up without a restart. */
struct blobs_config {
	char *registry;	  /* without a trailing '/' */
	char *repository; /* the distribution grammar's name */
	char *username;	  /* NULL: no credentials */
	char *password_file;
	/* "cache_max": the cap of a worker's layer cache, bytes (0: none;
	 * sched/layer_cache.c) */
	uint64_t cache_max;
};

/* Parses v into out (zeroed first; written only on success). Errors name
 * the key ("blobs.repository: ..."). */
int blobs_config_parse(const json_t *v, struct blobs_config *out,
		       struct wr_error **err);
void blobs_config_clear(struct blobs_config *cfg);
/* The distribution spec's name grammar:
 * [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*,
 * at most BLOBS_REPOSITORY_MAX bytes. */
bool blobs_repository_valid(const char *name);
/* "sha256:" and 64 lowercase hex digits (the only algorithm we use). */
bool blobs_digest_valid(const char *digest);
/* A tag: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. */
bool blobs_tag_valid(const char *tag);
/* The password (caller frees and wipes), read from password_file now. */
int blobs_config_password(const struct blobs_config *cfg, char **out,
			  struct wr_error **err);

/* ---- the WWW-Authenticate challenge (auth.c, pure) --------------------- */

enum blobs_auth_scheme {
	BLOBS_AUTH_BASIC,
	BLOBS_AUTH_BEARER,
	BLOBS_AUTH_OTHER,
	BLOBS_AUTH_MAX
};

#define BLOBS_REALM_MAX 2048
#define BLOBS_SERVICE_MAX 256
#define BLOBS_SCOPE_MAX 512

struct blobs_challenge {
	enum blobs_auth_scheme scheme;
	char realm[BLOBS_REALM_MAX];	 /* "" when absent */
	char service[BLOBS_SERVICE_MAX]; /* "" when absent */
	char scope[BLOBS_SCOPE_MAX];	 /* "" when absent */
};

/* The first challenge of a WWW-Authenticate value (len bytes, no NUL
 * needed): its scheme (case-blind) and the realm, service and scope
 * parameters (names case-blind, values a token or a quoted string with
 * its escapes undone; other parameters skipped). -EINVAL for a value that
 * does not follow RFC 7235's grammar, a parameter given twice or a NUL in
 * a value, -E2BIG for a value past its field; out written only on
 * success. */
int blobs_challenge_parse(const char *value, size_t len,
			  struct blobs_challenge *out);

/* ---- manifests (manifest.c, pure) -------------------------------------- */

/* annotations (here and in the manifest): NULL, or a JSON object of
 * strings, owned (json_decref at clear) */
struct blobs_descriptor {
	char *media_type;
	char digest[BLOBS_DIGEST_MAX];
	uint64_t size;
	json_t *annotations;
};

struct blobs_manifest {
	struct blobs_descriptor config;
	struct blobs_descriptor *layers;
	size_t n_layers;
	json_t *annotations;
};

/* The manifest's JSON (caller frees): schemaVersion 2, the OCI manifest
 * media type, config and layers in order, annotations where set (their
 * keys in the order they were set). -EINVAL for annotations that are not an
 * object of at most BLOBS_ANNOTATIONS_MAX strings, -EINVAL for a descriptor
 * without a media type or with a bad digest, or no layers past
 * BLOBS_LAYERS_MAX. */
int blobs_manifest_build(const struct blobs_manifest *m, char **json,
			 struct wr_error **err);
/* Parses and checks a manifest (len bytes): an object, schemaVersion 2,
 * mediaType (when present) the OCI manifest's, a config descriptor and an
 * array of at most BLOBS_LAYERS_MAX layer descriptors, each with a
 * mediaType, a sha256 digest and a size; annotations, where present,
 * checked as build checks them. out written only on success. */
int blobs_manifest_parse(const char *json, size_t len,
			 struct blobs_manifest *out, struct wr_error **err);
void blobs_manifest_clear(struct blobs_manifest *m);

/* ---- the client (client.c) --------------------------------------------- */

struct blobs_client;

/* A client of cfg's registry and repository (cfg is copied). One client
 * is for one thread at a time. */
int blobs_client_new(const struct blobs_config *cfg, struct blobs_client **out,
		     struct wr_error **err);
void blobs_client_free(struct blobs_client *c);

/* 1 with *size when the repository holds the blob, 0 when it does not. */
int blobs_exists(struct blobs_client *c, const char *digest, uint64_t *size,
		 struct wr_error **err);
/* Uploads what fd holds from its offset to its end, streamed (POST, one
 * PATCH, PUT ?digest=), its sha256 computed while reading; the digest and
 * size written. */
int blobs_push(struct blobs_client *c, int fd, char digest[BLOBS_DIGEST_MAX],
	       uint64_t *size, struct wr_error **err);
/* Downloads the blob into fd, streamed, at most max bytes (0: no cap),
 * its sha256 checked against digest. *written says how many bytes went to
 * fd whatever happened, so the caller can discard a partial or a wrong
 * output: -EBADMSG when the bytes do not match the digest, -EFBIG past
 * max, -ENOENT when the registry does not hold it. */
int blobs_pull(struct blobs_client *c, const char *digest, int fd, uint64_t max,
	       uint64_t *written, struct wr_error **err);
/* Puts a manifest (json, len bytes: sent as given) under ref, a tag or
 * its digest; the digest the registry gives it written. */
int blobs_manifest_put(struct blobs_client *c, const char *ref,
		       const char *json, size_t len,
		       char digest[BLOBS_DIGEST_MAX], struct wr_error **err);
/* The manifest under ref (a tag or a digest), at most BLOBS_MANIFEST_MAX
 * bytes, its digest checked when ref is one; *json NUL-terminated (caller
 * frees). */
int blobs_manifest_get(struct blobs_client *c, const char *ref, char **json,
		       size_t *len, char digest[BLOBS_DIGEST_MAX],
		       struct wr_error **err);
/* The repository's tags (an array of *n strings; free with
 * blobs_tags_free), every page the registry gives (Link: rel="next"), at
 * most BLOBS_TAGS_MAX. */
int blobs_tags(struct blobs_client *c, char ***tags, size_t *n,
	       struct wr_error **err);
void blobs_tags_free(char **tags, size_t n);
/* Deletes the manifest with this digest (the registry must allow
 * deletes). */
int blobs_manifest_delete(struct blobs_client *c, const char *digest,
			  struct wr_error **err);
/* Deletes the repository's link to the blob with this digest (202; the
 * registry's own garbage collection frees its storage): -ENOENT when the
 * repository does not hold it, -EOPNOTSUPP (405) when deletes are off. */
int blobs_blob_delete(struct blobs_client *c, const char *digest,
		      struct wr_error **err);

#endif
