/* store_internal.h - shared between store.c (the layer store) and
 * manifest.c (manifest JSON) only: what the store needs to read, check and
 * write a manifest. Everything else goes through store.h. */
#ifndef WR_SNAPSHOT_STORE_INTERNAL_H
#define WR_SNAPSHOT_STORE_INTERNAL_H

#include "snapshot/store.h"

#include <stddef.h>

#define SNAP_WHY_MAX 256 /* why a manifest is not well-formed */

/* The rules every manifest follows, published or read back: 0, or
 * -EBADMSG with why (a buffer of SNAP_WHY_MAX bytes, here and below). */
int snap_manifest_check(const struct snap_manifest *m, char *why);

/* A stored manifest from its JSON text (checked as snap_manifest_check
 * does, and with a valid id): 0, -EBADMSG with why, or -ENOMEM. */
int snap_manifest_parse(const char *text, size_t len,
			struct snap_manifest **out, char *why);

/* The manifest's id and its text as stored. The id is the sha256 of the
 * manifest's compact JSON with sorted keys and without "id" (whatever m->id
 * holds); the text is the JSON with that id, indented, with sorted keys,
 * and ends with the NUL json_dumps() leaves, which the caller may overwrite
 * with a newline. The caller frees the text; NULL on allocation failure,
 * and id_out is then left alone. */
char *snap_manifest_encode(const struct snap_manifest *m,
			   char id_out[SNAP_ID_LEN + 1]);

#endif
