/* manifest.c - snapshot manifests as JSON (see store.h for the fields, the
 * caps and how an id is computed): encoding, decoding with the checks every
 * manifest passes, the canonical id, and freeing. The store (store.c) reads
 * and writes the files; this file never touches the disk. */
#include "snapshot/store_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_FORMAT 1
#define MANIFEST_MAX_LAYERS 128
#define MANIFEST_MAX_LOCKFILES 256
#define MANIFEST_MAX_TIMINGS 64
#define MANIFEST_STR_MAX 4096
#define MANIFEST_NAME_MAX 64 /* roles, phases, status */

static int bad(char *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Describes why a manifest is not well-formed; returns -EBADMSG. */
static int bad(char *why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, SNAP_WHY_MAX, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* ---- encoding ----------------------------------------------------------- */

static bool jset(json_t *o, const char *key, json_t *v)
{
	return v && json_object_set_new(o, key, v) == 0;
}

static bool jset_str(json_t *o, const char *key, const char *v)
{
	return !v || jset(o, key, json_string(v));
}

static json_t *lockfiles_to_json(const struct snap_manifest *m)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < m->n_lockfiles; i++) {
		json_t *e = json_object();
		if (!e || json_array_append_new(a, e) < 0 ||
		    !jset_str(e, "path", m->lockfiles[i].path) ||
		    !jset_str(e, "sha256", m->lockfiles[i].sha256)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *layers_to_json(const struct snap_manifest *m)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < m->n_layers; i++) {
		const struct snap_layer_ref *l = &m->layers[i];
		json_t *e = json_object();
		if (!e || json_array_append_new(a, e) < 0 ||
		    !jset_str(e, "id", l->id) ||
		    !jset_str(e, "role", l->role) ||
		    !jset(e, "bytes", json_integer((json_int_t)l->bytes))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *timings_to_json(const struct snap_manifest *m)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < m->n_timings; i++) {
		json_t *e = json_object();
		if (!e || json_array_append_new(a, e) < 0 ||
		    !jset_str(e, "phase", m->timings[i].phase) ||
		    !jset(e, "ms", json_real(m->timings[i].ms))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

json_t *snap_manifest_to_json(const struct snap_manifest *m)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = jset(o, "format", json_integer(MANIFEST_FORMAT)) &&
		  (!m->id[0] || jset_str(o, "id", m->id)) &&
		  jset_str(o, "repo", m->repo) && jset_str(o, "ref", m->ref) &&
		  jset_str(o, "commit", m->commit) &&
		  jset_str(o, "spec_hash", m->spec_hash) &&
		  jset(o, "lockfiles", lockfiles_to_json(m)) &&
		  jset(o, "layers", layers_to_json(m)) &&
		  jset(o, "timings", timings_to_json(m)) &&
		  jset(o, "created_ms", json_integer(m->created_ms)) &&
		  jset_str(o, "warren_version", m->warren_version) &&
		  jset_str(o, "status", m->status) &&
		  jset_str(o, "deps_key", m->deps_key) &&
		  (!m->extra || json_object_set(o, "extra", m->extra) == 0);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- decoding and checking ---------------------------------------------- */

static bool str_ok(const char *s, size_t max)
{
	return !s || (s[0] && strlen(s) <= max);
}

/* The rules every manifest follows, published or read back. */
int snap_manifest_check(const struct snap_manifest *m, char *why)
{
	if (!m->repo || !m->repo[0])
		return bad(why, "repo is missing");
	const char *strs[] = {m->repo, m->ref, m->commit, m->spec_hash,
			      m->warren_version};
	for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
		if (!str_ok(strs[i], MANIFEST_STR_MAX))
			return bad(why, "a field is empty or too long");
	if (!str_ok(m->status, MANIFEST_NAME_MAX))
		return bad(why, "status is empty or too long");
	if (m->deps_key && !snap_key_valid(m->deps_key))
		return bad(why, "deps_key is not a valid cache key");
	if (m->created_ms < 0)
		return bad(why, "created_ms is negative");
	if (m->extra && !json_is_object(m->extra))
		return bad(why, "extra is not an object");
	if (m->n_layers > MANIFEST_MAX_LAYERS || (m->n_layers && !m->layers))
		return bad(why, "too many layers (at most %d)",
			   MANIFEST_MAX_LAYERS);
	for (size_t i = 0; i < m->n_layers; i++) {
		const struct snap_layer_ref *l = &m->layers[i];
		if (!snap_id_valid(l->id))
			return bad(why, "layers[%zu].id is not a layer id", i);
		if (!str_ok(l->role, MANIFEST_NAME_MAX))
			return bad(why, "layers[%zu].role is empty or too long",
				   i);
		if (l->bytes > INT64_MAX)
			return bad(why, "layers[%zu].bytes is too large", i);
	}
	if (m->n_lockfiles > MANIFEST_MAX_LOCKFILES ||
	    (m->n_lockfiles && !m->lockfiles))
		return bad(why, "too many lockfiles (at most %d)",
			   MANIFEST_MAX_LOCKFILES);
	for (size_t i = 0; i < m->n_lockfiles; i++) {
		if (!m->lockfiles[i].path ||
		    !str_ok(m->lockfiles[i].path, MANIFEST_STR_MAX))
			return bad(why, "lockfiles[%zu].path is missing", i);
		if (!snap_id_valid(m->lockfiles[i].sha256))
			return bad(why,
				   "lockfiles[%zu].sha256 is not 64 lowercase "
				   "hex digits",
				   i);
	}
	if (m->n_timings > MANIFEST_MAX_TIMINGS ||
	    (m->n_timings && !m->timings))
		return bad(why, "too many timings (at most %d)",
			   MANIFEST_MAX_TIMINGS);
	for (size_t i = 0; i < m->n_timings; i++) {
		if (!m->timings[i].phase ||
		    !str_ok(m->timings[i].phase, MANIFEST_NAME_MAX))
			return bad(why, "timings[%zu].phase is missing", i);
		if (!isfinite(m->timings[i].ms) || m->timings[i].ms < 0)
			return bad(why, "timings[%zu].ms is not a duration", i);
	}
	return 0;
}

/* A string member: absent and null leave *dst NULL. */
static int take_str(json_t *o, const char *key, const char *label, char **dst,
		    char *why)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return bad(why, "%s is not a string", label);
	const char *text = json_string_value(v);
	if (strlen(text) != json_string_length(v))
		return bad(why, "%s holds a NUL character", label);
	if (strlen(text) > MANIFEST_STR_MAX)
		return bad(why, "%s is too long", label);
	*dst = wr_strdup(text);
	return *dst ? 0 : -ENOMEM;
}

/* The elements of array member key, checked against a cap. */
static int take_array(json_t *o, const char *key, size_t max, json_t **out,
		      size_t *n, char *why)
{
	json_t *a = json_object_get(o, key);
	if (!json_is_array(a))
		return bad(why, "%s is missing or not an array", key);
	if (json_array_size(a) > max)
		return bad(why, "%s has more than %zu entries", key, max);
	*out = a;
	*n = json_array_size(a);
	return 0;
}

static int take_id(json_t *e, const char *key, const char *label, size_t i,
		   char dst[SNAP_ID_LEN + 1], char *why)
{
	const char *v = json_string_value(json_object_get(e, key));
	if (!snap_id_valid(v))
		return bad(why, "%s[%zu].%s is not 64 lowercase hex digits",
			   label, i, key);
	memcpy(dst, v, SNAP_ID_LEN + 1);
	return 0;
}

static int layers_from_json(json_t *o, struct snap_manifest *m, char *why)
{
	json_t *a;
	size_t n;
	int r = take_array(o, "layers", MANIFEST_MAX_LAYERS, &a, &n, why);
	if (r < 0 || n == 0)
		return r;
	if (!(m->layers = wr_calloc(n, sizeof(*m->layers))))
		return -ENOMEM;
	m->n_layers = n;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i);
		json_t *bytes = json_object_get(e, "bytes");
		char label[64];
		snprintf(label, sizeof(label), "layers[%zu].role", i);
		if ((r = take_id(e, "id", "layers", i, m->layers[i].id, why)) <
			0 ||
		    (r = take_str(e, "role", label, &m->layers[i].role, why)) <
			0)
			return r;
		if (!json_is_integer(bytes) || json_integer_value(bytes) < 0)
			return bad(why, "layers[%zu].bytes is not a size", i);
		m->layers[i].bytes = (uint64_t)json_integer_value(bytes);
	}
	return 0;
}

static int lockfiles_from_json(json_t *o, struct snap_manifest *m, char *why)
{
	json_t *a;
	size_t n;
	int r = take_array(o, "lockfiles", MANIFEST_MAX_LOCKFILES, &a, &n, why);
	if (r < 0 || n == 0)
		return r;
	if (!(m->lockfiles = wr_calloc(n, sizeof(*m->lockfiles))))
		return -ENOMEM;
	m->n_lockfiles = n;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i);
		char label[64];
		snprintf(label, sizeof(label), "lockfiles[%zu].path", i);
		if ((r = take_str(e, "path", label, &m->lockfiles[i].path,
				  why)) < 0 ||
		    (r = take_id(e, "sha256", "lockfiles", i,
				 m->lockfiles[i].sha256, why)) < 0)
			return r;
	}
	return 0;
}

static int timings_from_json(json_t *o, struct snap_manifest *m, char *why)
{
	json_t *a;
	size_t n;
	int r = take_array(o, "timings", MANIFEST_MAX_TIMINGS, &a, &n, why);
	if (r < 0 || n == 0)
		return r;
	if (!(m->timings = wr_calloc(n, sizeof(*m->timings))))
		return -ENOMEM;
	m->n_timings = n;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i);
		json_t *ms = json_object_get(e, "ms");
		char label[64];
		snprintf(label, sizeof(label), "timings[%zu].phase", i);
		if ((r = take_str(e, "phase", label, &m->timings[i].phase,
				  why)) < 0)
			return r;
		if (!json_is_number(ms))
			return bad(why, "timings[%zu].ms is not a number", i);
		m->timings[i].ms = json_number_value(ms);
	}
	return 0;
}

/* 0, -EBADMSG with why, or -ENOMEM. */
static int manifest_from_json(json_t *o, struct snap_manifest **out, char *why)
{
	if (!json_is_object(o))
		return bad(why, "not a JSON object");
	json_t *format = json_object_get(o, "format");
	if (!json_is_integer(format))
		return bad(why, "format is missing");
	if (json_integer_value(format) != MANIFEST_FORMAT)
		return bad(why, "unsupported format %" JSON_INTEGER_FORMAT,
			   json_integer_value(format));
	struct snap_manifest *m = wr_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	json_t *created = json_object_get(o, "created_ms");
	json_t *extra = json_object_get(o, "extra");
	const char *id = json_string_value(json_object_get(o, "id"));
	int r = 0;
	if (!snap_id_valid(id))
		r = bad(why, "id is missing or not 64 lowercase hex digits");
	else if (!json_is_integer(created))
		r = bad(why, "created_ms is missing or not an integer");
	else if (extra && !json_is_object(extra))
		r = bad(why, "extra is not an object");
	if (r == 0) {
		memcpy(m->id, id, SNAP_ID_LEN + 1);
		m->created_ms = json_integer_value(created);
		m->extra = json_incref(extra);
	}
	if (r == 0)
		r = take_str(o, "repo", "repo", &m->repo, why);
	if (r == 0)
		r = take_str(o, "ref", "ref", &m->ref, why);
	if (r == 0)
		r = take_str(o, "commit", "commit", &m->commit, why);
	if (r == 0)
		r = take_str(o, "spec_hash", "spec_hash", &m->spec_hash, why);
	if (r == 0)
		r = take_str(o, "warren_version", "warren_version",
			     &m->warren_version, why);
	if (r == 0)
		r = take_str(o, "status", "status", &m->status, why);
	if (r == 0)
		r = take_str(o, "deps_key", "deps_key", &m->deps_key, why);
	if (r == 0)
		r = layers_from_json(o, m, why);
	if (r == 0)
		r = lockfiles_from_json(o, m, why);
	if (r == 0)
		r = timings_from_json(o, m, why);
	if (r == 0)
		r = snap_manifest_check(m, why);
	if (r < 0) {
		snap_manifest_free(m);
		return r;
	}
	*out = m;
	return 0;
}

/* 0, -EBADMSG (why), or -ENOMEM. jansson reports an allocation failure
 * in setting up its lexer without any error text; a syntax error always
 * has one. */
static int parse_json(const char *text, size_t len, json_t **out, char *why)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (o) {
		*out = o;
		return 0;
	}
	if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])
		return -ENOMEM;
	return bad(why, "line %d: %s", jerr.line, jerr.text);
}

int snap_manifest_parse(const char *text, size_t len,
			struct snap_manifest **out, char *why)
{
	json_t *o = NULL;
	int r = parse_json(text, len, &o, why);
	if (r < 0)
		return r;
	r = manifest_from_json(o, out, why);
	json_decref(o);
	return r;
}

int snap_manifest_from_json(const char *text, size_t len,
			    struct snap_manifest **out, struct wr_error **err)
{
	char why[SNAP_WHY_MAX] = "";
	struct snap_manifest *m = NULL;
	int r = snap_manifest_parse(text, len, &m, why);
	if (r == -ENOMEM)
		return wr_error_set(err, ENOMEM, "manifest");
	if (r < 0)
		return wr_error_set(err, -r, "manifest: %s", why);
	char id[SNAP_ID_LEN + 1];
	char *encoded = snap_manifest_encode(m, id);
	if (!encoded) {
		snap_manifest_free(m);
		return wr_error_set(err, ENOMEM, "manifest");
	}
	free(encoded);
	if (strcmp(id, m->id)) {
		r = wr_error_set(
		    err, EBADMSG,
		    "manifest: its id %s is not its content's (%s)", m->id, id);
		snap_manifest_free(m);
		return r;
	}
	*out = m;
	return 0;
}

/* ---- the id ------------------------------------------------------------- */

char *snap_manifest_encode(const struct snap_manifest *m,
			   char id_out[SNAP_ID_LEN + 1])
{
	/* the id covers everything but itself: encode without it */
	struct snap_manifest anon = *m;
	anon.id[0] = '\0';
	json_t *o = snap_manifest_to_json(&anon);
	char *canonical =
	    o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char id[SNAP_ID_LEN + 1];
	char *text = NULL;
	if (canonical) {
		unsigned char digest[crypto_hash_sha256_BYTES];
		crypto_hash_sha256(digest, (const unsigned char *)canonical,
				   strlen(canonical));
		sodium_bin2hex(id, sizeof(id), digest, sizeof(digest));
		if (jset_str(o, "id", id))
			text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	}
	json_decref(o);
	free(canonical);
	if (text)
		memcpy(id_out, id, sizeof(id));
	return text;
}

/* ---- freeing ------------------------------------------------------------ */

void snap_manifest_free(struct snap_manifest *m)
{
	if (!m)
		return;
	free(m->repo);
	free(m->ref);
	free(m->commit);
	free(m->spec_hash);
	for (size_t i = 0; m->lockfiles && i < m->n_lockfiles; i++)
		free(m->lockfiles[i].path);
	free(m->lockfiles);
	for (size_t i = 0; m->layers && i < m->n_layers; i++)
		free(m->layers[i].role);
	free(m->layers);
	for (size_t i = 0; m->timings && i < m->n_timings; i++)
		free(m->timings[i].phase);
	free(m->timings);
	free(m->warren_version);
	free(m->status);
	free(m->deps_key);
	json_decref(m->extra);
	free(m);
}

void snap_manifest_free_array(struct snap_manifest **ms, size_t n)
{
	if (!ms)
		return;
	for (size_t i = 0; i < n; i++)
		snap_manifest_free(ms[i]);
	free(ms);
}
