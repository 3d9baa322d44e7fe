/* auth.c - bearer tokens and roles, and the two small caches in front of
 * the store (token hash -> user and role; repository id -> name).
 *
 * A token is only ever stored as its SHA-256; the plain text exists once,
 * when api_token_issue returns it, and is never logged. A token is looked
 * up by its hash: the store's comparison is on the hash of what the
 * client sent, so its timing tells nothing about any stored token; the
 * cache compares hashes with sodium_memcmp all the same.
 *
 * A hit in the token cache is trusted for API_TOKEN_CACHE_TTL_MS (and
 * never past the token's own expiry). A revocation through this API
 * (api_token_revoke) empties the cache, and a lookup that raced with it
 * does not fill it (the generation check below): a revoked token is
 * refused from the next request on. Only a change made to the store behind
 * the server's back (an operator's sqlite3 shell) waits for the TTL. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <ctype.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const role_names[API_ROLE_MAX] = {
    [API_ROLE_ADMIN] = "admin",
    [API_ROLE_REVIEWER] = "reviewer",
    [API_ROLE_SUBMITTER] = "submitter",
};

int api_role_parse(const char *name)
{
	for (int i = 0; name && i < API_ROLE_MAX; i++)
		if (strcmp(role_names[i], name) == 0)
			return i;
	return -EINVAL;
}

const char *api_role_name(enum api_role role)
{
	return role < API_ROLE_MAX ? role_names[role] : NULL;
}

int api_validate_user(const char *user)
{
	if (!user || !isalnum((unsigned char)user[0]))
		return -EINVAL;
	size_t n = 0;
	for (const char *p = user; *p; p++, n++) {
		if (n == API_TOKEN_USER_MAX)
			return -EINVAL;
		if (!isalnum((unsigned char)*p) && !strchr("._@+-", *p))
			return -EINVAL;
	}
	return 0;
}

int api_token_hash(const char *plain, char out_hex[65])
{
	if (!plain)
		return -EINVAL;
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(digest, (const unsigned char *)plain, strlen(plain));
	sodium_bin2hex(out_hex, 65, digest, sizeof(digest));
	return 0;
}

/* The default name of a token of user: the user with the characters a
 * name may not have ('@', '+') as '_', cut so that "-" and 8 random hex
 * digits fit. */
static void default_name(const char *user, char out[STORE_TOKEN_NAME_MAX + 1])
{
	size_t keep = STORE_TOKEN_NAME_MAX - 9, n = 0;
	for (; user[n] && n < keep; n++)
		out[n] = strchr("@+", user[n]) ? '_' : user[n];
	unsigned char raw[4];
	randombytes_buf(raw, sizeof(raw));
	out[n++] = '-';
	sodium_bin2hex(out + n, STORE_TOKEN_NAME_MAX + 1 - n, raw, sizeof(raw));
}

/* A new random token: "wr_" + 43 base64url characters. NULL on ENOMEM. */
static char *token_new(void)
{
	unsigned char raw[32];
	char b64[sodium_base64_ENCODED_LEN(
	    sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	char *plain = wr_asprintf("wr_%s", b64);
	sodium_memzero(b64, sizeof(b64));
	return plain;
}

static void plain_freep(char **plain)
{
	if (*plain)
		sodium_memzero(*plain, strlen(*plain));
	free(*plain);
}

/* How many default names to draw before giving up: 32 random bits make a
 * clash of two unlikely, of three absurd. */
#define DEFAULT_NAME_TRIES 3

int api_token_issue(struct store *st, const struct api_token_spec *spec,
		    char **plain_out, char name_out[STORE_TOKEN_NAME_MAX + 1],
		    struct wr_error **err)
{
	if (api_validate_user(spec->user) < 0)
		return wr_error_input(err, 0,
				      "user: expected 1 to %d of "
				      "[A-Za-z0-9._@+-], starting with a "
				      "letter or digit",
				      API_TOKEN_USER_MAX);
	if (api_role_parse(spec->role) < 0)
		return wr_error_input(
		    err, 0, "role: expected admin, reviewer or submitter");
	if (spec->name && !store_token_name_valid(spec->name))
		return wr_error_input(err, 0,
				      "name: expected 1 to %d of "
				      "[A-Za-z0-9._-], starting with a "
				      "letter or digit",
				      STORE_TOKEN_NAME_MAX);
	int64_t now = store_now_ms();
	if (spec->expires_ms < 0 ||
	    (spec->expires_ms && spec->expires_ms <= now))
		return wr_error_input(err, 0, "expires: already past");
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "initialize libsodium");

	_cleanup_(plain_freep) char *plain = token_new();
	if (!plain)
		return wr_error_set(err, ENOMEM, "create a token");
	char hash[65];
	api_token_hash(plain, hash);
	char name[STORE_TOKEN_NAME_MAX + 1];
	/* the store takes the record by const pointer; the casts only drop
	 * const from our own arguments */
	struct store_token t = {
	    .user = (char *)spec->user,
	    .role = (char *)spec->role,
	    .name = name,
	    .created_ms = now,
	    .expires_ms = spec->expires_ms,
	};
	int r = -EEXIST;
	for (int i = 0; r == -EEXIST && i < DEFAULT_NAME_TRIES; i++) {
		if (spec->name)
			snprintf(name, sizeof(name), "%s", spec->name);
		else
			default_name(spec->user, name);
		if (i > 0 && err) {
			wr_error_free(*err);
			*err = NULL;
		}
		r = st->ops->token_add(st, hash, &t, err);
		if (spec->name)
			break;
	}
	if (r < 0)
		return r == -EEXIST ? r : wr_error_wrap(err, "store the token");
	if (name_out)
		memcpy(name_out, name, sizeof(name));
	*plain_out = TAKE_PTR(plain);
	return 0;
}

int api_token_create(struct store *st, const char *user, const char *role,
		     char **plain_out, struct wr_error **err)
{
	struct api_token_spec spec = {.user = user, .role = role};
	return api_token_issue(st, &spec, plain_out, NULL, err);
}

int api_token_revoke(struct api *a, const char *name, int64_t *revoked_ms,
		     struct wr_error **err)
{
	int r = a->st->ops->token_revoke(a->st, name, store_now_ms(),
					 revoked_ms, err);
	if (r < 0)
		return r;
	/* The store no longer knows the token; the cache must forget it too,
	 * and a lookup that read the store before the revocation must not
	 * put it back (api_authenticate fills a slot only if the generation
	 * it started with is still current). The cache is keyed by hash,
	 * which we do not have here: empty all of it, revocations are rare. */
	pthread_mutex_lock(&a->cache_lock);
	a->token_gen++;
	for (size_t i = 0; i < API_TOKEN_CACHE_SLOTS; i++)
		a->tokens[i].hash[0] = '\0';
	pthread_mutex_unlock(&a->cache_lock);
	return 0;
}

/* "Bearer TOKEN" -> TOKEN (1..256 visible ASCII characters), copied into
 * buf; false if the header is missing or malformed. */
static bool bearer_token(const char *header, char buf[257])
{
	if (!header)
		return false;
	while (*header == ' ' || *header == '\t')
		header++;
	if (strncasecmp(header, "Bearer", 6) != 0 ||
	    (header[6] != ' ' && header[6] != '\t'))
		return false;
	const char *p = header + 6;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = 0;
	while (p[n] > 0x20 && p[n] < 0x7f) {
		if (n == 256)
			return false;
		buf[n] = p[n];
		n++;
	}
	for (const char *q = p + n; *q; q++)
		if (*q != ' ' && *q != '\t')
			return false;
	buf[n] = '\0';
	return n > 0;
}

static size_t token_slot(const char *hash)
{
	/* the hash is uniformly distributed: its first digits will do */
	size_t v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = hash[i];
		v = v * 16 + (size_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
	}
	return v % API_TOKEN_CACHE_SLOTS;
}

int api_authenticate(struct api *a, const char *authorization,
		     struct api_principal *who, struct wr_error **err)
{
	char token[257];
	if (!bearer_token(authorization, token))
		return -EACCES;
	char hash[65];
	api_token_hash(token, hash);
	sodium_memzero(token, sizeof(token));

	int64_t now = store_now_ms();
	struct api_token_slot *slot = &a->tokens[token_slot(hash)];
	pthread_mutex_lock(&a->cache_lock);
	uint64_t gen = a->token_gen;
	if (slot->hash[0] && sodium_memcmp(slot->hash, hash, 64) == 0 &&
	    now - slot->cached_ms < API_TOKEN_CACHE_TTL_MS &&
	    (slot->expires_ms == 0 || now < slot->expires_ms)) {
		memcpy(who->user, slot->user, sizeof(who->user));
		who->role = slot->role;
		pthread_mutex_unlock(&a->cache_lock);
		return 0;
	}
	pthread_mutex_unlock(&a->cache_lock);

	struct store_token t = {0};
	int r = a->st->ops->token_lookup(a->st, hash, now, &t, err);
	if (r == -ENOENT)
		return -EACCES;
	if (r < 0)
		return r;
	int role = api_role_parse(t.role);
	/* a record we could not have written: refuse rather than guess */
	if (role < 0 || api_validate_user(t.user) < 0) {
		store_token_clear(&t);
		return -EACCES;
	}
	struct api_principal p = {.role = (enum api_role)role};
	snprintf(p.user, sizeof(p.user), "%s", t.user);
	int64_t expires = t.expires_ms;
	bool touch = now - t.last_used_ms >= API_TOKEN_TOUCH_MS;
	store_token_clear(&t);

	pthread_mutex_lock(&a->cache_lock);
	if (a->token_gen == gen) { /* no revocation since our lookup */
		memcpy(slot->hash, hash, sizeof(slot->hash));
		memcpy(slot->user, p.user, sizeof(slot->user));
		slot->role = p.role;
		slot->expires_ms = expires;
		slot->cached_ms = now;
	}
	pthread_mutex_unlock(&a->cache_lock);
	/* when it was last used, for `warren token ls`: at most one write a
	 * minute per token, and a failed one costs nothing but the record */
	if (touch)
		(void)a->st->ops->token_touch(a->st, hash, now, NULL);
	*who = p;
	return 0;
}

static size_t repo_slot(const char *id)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % API_REPO_CACHE_SLOTS;
}

json_t *api_repo_name_json(struct api *a, const char *repo_id)
{
	struct api_repo_slot *slot = &a->repos[repo_slot(repo_id)];
	pthread_mutex_lock(&a->cache_lock);
	if (strcmp(slot->id, repo_id) == 0 && slot->name) {
		json_t *name = api_json_string(slot->name);
		pthread_mutex_unlock(&a->cache_lock);
		return name;
	}
	pthread_mutex_unlock(&a->cache_lock);

	struct store_repo repo = {0};
	struct wr_error *err = NULL;
	int r = a->st->ops->repo_get(a->st, repo_id, &repo, &err);
	wr_error_free(err);
	if (r < 0) /* a session's repository always exists; be lenient */
		return json_null();
	json_t *name = api_json_string(repo.name);
	char *copy = repo.name ? wr_strdup(repo.name) : NULL;
	if (copy && strlen(repo_id) < sizeof(slot->id)) {
		pthread_mutex_lock(&a->cache_lock);
		free(slot->name);
		slot->name = copy;
		snprintf(slot->id, sizeof(slot->id), "%s", repo_id);
		pthread_mutex_unlock(&a->cache_lock);
	} else {
		free(copy);
	}
	store_repo_clear(&repo);
	return name;
}

void api_cache_clear(struct api *a)
{
	pthread_mutex_lock(&a->cache_lock);
	for (size_t i = 0; i < API_REPO_CACHE_SLOTS; i++) {
		free(a->repos[i].name);
		a->repos[i].name = NULL;
		a->repos[i].id[0] = '\0';
	}
	for (size_t i = 0; i < API_TOKEN_CACHE_SLOTS; i++)
		a->tokens[i].hash[0] = '\0';
	pthread_mutex_unlock(&a->cache_lock);
}
