/* manifest.c - what the registry's JSON says: OCI image manifests as typed
 * structs, built into JSON and parsed back with every field checked
 * (blobs.h); the registry's error bodies (internal.h). Pure. */
#include "blobs/internal.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a media type: type "/" subtype with a suffix, RFC 6838's characters */
#define MEDIA_TYPE_MAX 255
#define ERROR_ENTRIES_MAX 4
#define ERROR_TEXT_MAX 512

static bool media_type_valid(const char *s)
{
	size_t len = strlen(s);
	const char *slash = strchr(s, '/');
	if (!len || len > MEDIA_TYPE_MAX || !slash || slash == s || !slash[1] ||
	    strchr(slash + 1, '/'))
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("/!#$&-^_.+", *p)))
			return false;
	return true;
}

#define ANNOTATION_TEXT_MAX 1024

static int annotations_check(const json_t *a, const char *where,
			     struct wr_error **err)
{
	if (!a)
		return 0;
	if (!json_is_object(a) || json_object_size(a) > BLOBS_ANNOTATIONS_MAX) {
		wr_error_input(err, 0,
			       "manifest: %s: annotations: expected an object "
			       "of at most %d strings",
			       where, BLOBS_ANNOTATIONS_MAX);
		return -EINVAL;
	}
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)a, key, v)
	{
		if (!json_is_string(v) || strlen(key) > ANNOTATION_TEXT_MAX ||
		    json_string_length(v) > ANNOTATION_TEXT_MAX) {
			wr_error_input(err, 0,
				       "manifest: %s: annotations: '%.64s': "
				       "expected a string of at most %d bytes",
				       where, key, ANNOTATION_TEXT_MAX);
			return -EINVAL;
		}
	}
	return 0;
}

/* o["annotations"] = a copy of a, when set; 0 or -ENOMEM */
static int annotations_add(json_t *o, const json_t *a)
{
	if (!a)
		return 0;
	json_t *copy = json_deep_copy(a);
	return copy && json_object_set_new(o, "annotations", copy) == 0
		   ? 0
		   : -ENOMEM;
}

static int descriptor_check(const struct blobs_descriptor *d, const char *where,
			    struct wr_error **err)
{
	if (!d->media_type || !media_type_valid(d->media_type)) {
		wr_error_input(err, 0, "manifest: %s: bad mediaType", where);
		return -EINVAL;
	}
	if (!blobs_digest_valid(d->digest)) {
		wr_error_input(err, 0,
			       "manifest: %s: digest '%s' is not sha256:HEX",
			       where, d->digest);
		return -EINVAL;
	}
	/* JSON integers are signed 64-bit */
	if (d->size > INT64_MAX) {
		wr_error_input(err, 0, "manifest: %s: size too large", where);
		return -EINVAL;
	}
	return annotations_check(d->annotations, where, err);
}

static json_t *descriptor_json(const struct blobs_descriptor *d)
{
	json_t *o = json_pack("{s:s, s:s, s:I}", "mediaType", d->media_type,
			      "digest", d->digest, "size", (json_int_t)d->size);
	if (o && annotations_add(o, d->annotations) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int blobs_manifest_build(const struct blobs_manifest *m, char **json,
			 struct wr_error **err)
{
	int r = descriptor_check(&m->config, "config", err);
	if (r < 0)
		return r;
	if (!m->n_layers || m->n_layers > BLOBS_LAYERS_MAX) {
		wr_error_input(err, 0, "manifest: expected 1 to %d layers",
			       BLOBS_LAYERS_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < m->n_layers; i++) {
		char where[32];
		snprintf(where, sizeof(where), "layers[%zu]", i);
		if ((r = descriptor_check(&m->layers[i], where, err)) < 0)
			return r;
	}
	if ((r = annotations_check(m->annotations, "manifest", err)) < 0)
		return r;
	json_t *layers = json_array();
	json_t *doc = json_pack("{s:i, s:s, s:o, s:o}", "schemaVersion", 2,
				"mediaType", BLOBS_MEDIA_MANIFEST, "config",
				descriptor_json(&m->config), "layers", layers);
	if (!doc || annotations_add(doc, m->annotations) < 0) {
		json_decref(doc);
		return wr_error_set(err, ENOMEM, "manifest");
	}
	for (size_t i = 0; i < m->n_layers; i++)
		if (json_array_append_new(layers,
					  descriptor_json(&m->layers[i])) < 0) {
			json_decref(doc);
			return wr_error_set(err, ENOMEM, "manifest");
		}
	/* key order as given: the bytes (and so the digest) are stable */
	char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!text)
		return wr_error_set(err, ENOMEM, "manifest");
	*json = text;
	return 0;
}

static int descriptor_parse(const json_t *v, const char *where,
			    struct blobs_descriptor *out, struct wr_error **err)
{
	if (!json_is_object(v)) {
		wr_error_input(err, 0, "manifest: %s: expected an object",
			       where);
		return -EINVAL;
	}
	const json_t *mt = json_object_get(v, "mediaType");
	const json_t *dg = json_object_get(v, "digest");
	const json_t *sz = json_object_get(v, "size");
	if (!json_is_string(mt) || !json_is_string(dg) ||
	    !json_is_integer(sz) || json_integer_value(sz) < 0) {
		wr_error_input(err, 0,
			       "manifest: %s: expected \"mediaType\", "
			       "\"digest\" and a \"size\" of 0 or more",
			       where);
		return -EINVAL;
	}
	struct blobs_descriptor d = {
	    .media_type = (char *)json_string_value(mt),
	    .size = (uint64_t)json_integer_value(sz),
	    .annotations = json_object_get(v, "annotations")};
	const char *digest = json_string_value(dg);
	if (strlen(digest) >= sizeof(d.digest)) {
		wr_error_input(err, 0, "manifest: %s: digest is not sha256:HEX",
			       where);
		return -EINVAL;
	}
	strcpy(d.digest, digest);
	int r = descriptor_check(&d, where, err);
	if (r < 0)
		return r;
	d.media_type = wr_strdup(d.media_type);
	if (!d.media_type)
		return wr_error_set(err, ENOMEM, "manifest");
	json_incref(d.annotations);
	*out = d;
	return 0;
}

int blobs_manifest_parse(const char *json, size_t len,
			 struct blobs_manifest *out, struct wr_error **err)
{
	if (len > BLOBS_MANIFEST_MAX) {
		wr_error_input(err, 0, "manifest: larger than %u bytes",
			       BLOBS_MANIFEST_MAX);
		return -EFBIG;
	}
	json_error_t jerr;
	json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc) {
		wr_error_input(err, 0, "manifest: %d:%d: %s", jerr.line,
			       jerr.column, jerr.text);
		return -EINVAL;
	}
	struct blobs_manifest m = {0};
	int r = -EINVAL;
	const json_t *sv = json_object_get(doc, "schemaVersion");
	const json_t *mt = json_object_get(doc, "mediaType");
	const json_t *layers = json_object_get(doc, "layers");
	if (!json_is_object(doc)) {
		wr_error_input(err, 0, "manifest: expected an object");
		goto out;
	}
	if (!json_is_integer(sv) || json_integer_value(sv) != 2) {
		wr_error_input(err, 0, "manifest: schemaVersion: expected 2");
		goto out;
	}
	if (mt && (!json_is_string(mt) ||
		   strcmp(json_string_value(mt), BLOBS_MEDIA_MANIFEST))) {
		wr_error_input(err, 0, "manifest: mediaType: expected %s",
			       BLOBS_MEDIA_MANIFEST);
		goto out;
	}
	if (!json_is_array(layers) || !json_array_size(layers) ||
	    json_array_size(layers) > BLOBS_LAYERS_MAX) {
		wr_error_input(err, 0,
			       "manifest: layers: expected an array of 1 to "
			       "%d descriptors",
			       BLOBS_LAYERS_MAX);
		goto out;
	}
	if ((r = descriptor_parse(json_object_get(doc, "config"), "config",
				  &m.config, err)) < 0)
		goto out;
	m.layers = wr_calloc(json_array_size(layers), sizeof(*m.layers));
	if (!m.layers) {
		r = wr_error_set(err, ENOMEM, "manifest");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(layers); i++) {
		char where[32];
		snprintf(where, sizeof(where), "layers[%zu]", i);
		if ((r = descriptor_parse(json_array_get(layers, i), where,
					  &m.layers[i], err)) < 0)
			goto out;
		m.n_layers = i + 1;
	}
	m.annotations = json_object_get(doc, "annotations");
	if ((r = annotations_check(m.annotations, "manifest", err)) < 0) {
		m.annotations = NULL;
		goto out;
	}
	json_incref(m.annotations);
	*out = m;
	m = (struct blobs_manifest){0};
	r = 0;
out:
	blobs_manifest_clear(&m);
	json_decref(doc);
	return r;
}

void blobs_manifest_clear(struct blobs_manifest *m)
{
	if (!m)
		return;
	free(m->config.media_type);
	json_decref(m->config.annotations);
	for (size_t i = 0; i < m->n_layers; i++) {
		free(m->layers[i].media_type);
		json_decref(m->layers[i].annotations);
	}
	free(m->layers);
	json_decref(m->annotations);
	memset(m, 0, sizeof(*m));
}

/* ---- the registry's error body ----------------------------------------- */

static void append_clean(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(dst);
	for (; *src && n + 1 < cap; src++)
		dst[n++] =
		    ((unsigned char)*src < 0x20 || *src == 0x7f) ? ' ' : *src;
	dst[n] = '\0';
}

char *blobs_error_body_text(const char *body, size_t len)
{
	json_error_t jerr;
	json_t *doc = body ? json_loadb(body, len, 0, &jerr) : NULL;
	const json_t *errors = json_object_get(doc, "errors");
	char text[ERROR_TEXT_MAX] = "";
	size_t i;
	const json_t *e;
	json_array_foreach(errors, i, e)
	{
		if (i == ERROR_ENTRIES_MAX)
			break;
		const char *code =
		    json_string_value(json_object_get(e, "code"));
		const char *msg =
		    json_string_value(json_object_get(e, "message"));
		if (!code && !msg)
			continue;
		if (text[0])
			append_clean(text, sizeof(text), "; ");
		append_clean(text, sizeof(text), code ? code : "");
		if (code && msg)
			append_clean(text, sizeof(text), ": ");
		append_clean(text, sizeof(text), msg ? msg : "");
	}
	json_decref(doc);
	return text[0] ? wr_strdup(text) : NULL;
}
