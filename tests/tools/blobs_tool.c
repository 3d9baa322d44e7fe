/* blobs_tool.c - the registry client (src/blobs/) from the command line,
 * for tests/integration/blobs_registry.sh. Not an operator's tool.
 *
 *   blobs_tool CONFIG push FILE            prints "DIGEST SIZE"
 *   blobs_tool CONFIG exists DIGEST        prints the size, or "absent"
 *   blobs_tool CONFIG pull DIGEST OUT [MAX]
 *       OUT created; on any failure removed, the bytes it had said
 *   blobs_tool CONFIG manifest-put REF CONFIG_DIGEST:SIZE
 *                                  LAYER_DIGEST:SIZE...   prints the digest
 *   blobs_tool CONFIG manifest-get REF     prints "digest D", "config D S",
 *                                          "layer MEDIATYPE D S" lines
 *   blobs_tool CONFIG tags                 one tag a line
 *   blobs_tool CONFIG delete DIGEST
 *
 * CONFIG is a file holding the "blobs" object. Errors: one line on stderr,
 * exit 1 (2 for a bad command line). */
#include "blobs/blobs.h"
#include "util/cleanup.h"
#include "util/json_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: blobs_tool CONFIG push FILE | exists DIGEST | "
			"pull DIGEST OUT [MAX] | manifest-put REF "
			"DIGEST:SIZE... | manifest-get REF | tags | delete "
			"DIGEST\n");
	return 2;
}

/* "sha256:HEX:SIZE" */
static int descriptor_arg(const char *arg, const char *media_type,
			  struct blobs_descriptor *d)
{
	const char *colon = strrchr(arg, ':');
	if (!colon || (size_t)(colon - arg) >= sizeof(d->digest))
		return -EINVAL;
	memcpy(d->digest, arg, (size_t)(colon - arg));
	d->digest[colon - arg] = '\0';
	char *end;
	errno = 0;
	d->size = strtoull(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end)
		return -EINVAL;
	d->media_type = (char *)media_type;
	return 0;
}

static int run(struct blobs_client *c, int argc, char **argv,
	       struct wr_error **err)
{
	const char *cmd = argv[2];
	int r;
	if (!strcmp(cmd, "push") && argc == 4) {
		_cleanup_close_ int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return wr_error_set(err, errno, "%s", argv[3]);
		char digest[BLOBS_DIGEST_MAX];
		uint64_t size;
		if ((r = blobs_push(c, fd, digest, &size, err)) < 0)
			return r;
		printf("%s %" PRIu64 "\n", digest, size);
		return 0;
	}
	if (!strcmp(cmd, "exists") && argc == 4) {
		uint64_t size = 0;
		if ((r = blobs_exists(c, argv[3], &size, err)) < 0)
			return r;
		if (r)
			printf("%" PRIu64 "\n", size);
		else
			printf("absent\n");
		return 0;
	}
	if (!strcmp(cmd, "pull") && (argc == 5 || argc == 6)) {
		uint64_t max = argc == 6 ? strtoull(argv[5], NULL, 10) : 0;
		int fd = open(argv[4], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			      0600);
		if (fd < 0)
			return wr_error_set(err, errno, "%s", argv[4]);
		uint64_t written = 0;
		r = blobs_pull(c, argv[3], fd, max, &written, err);
		close(fd);
		if (r < 0) {
			/* what a caller does with a partial or wrong blob */
			unlink(argv[4]);
			fprintf(stderr,
				"blobs_tool: %" PRIu64
				" bytes written to %s, removed\n",
				written, argv[4]);
		}
		return r;
	}
	if (!strcmp(cmd, "manifest-put") && argc >= 6) {
		struct blobs_descriptor layers[16] = {0};
		struct blobs_manifest m = {.layers = layers,
					   .n_layers = (size_t)argc - 5};
		if (m.n_layers > ARRAY_SIZE(layers) ||
		    descriptor_arg(argv[4], BLOBS_MEDIA_CONFIG, &m.config) < 0)
			return wr_error_input(err, EINVAL, "bad descriptor");
		for (size_t i = 0; i < m.n_layers; i++)
			if (descriptor_arg(argv[5 + i], BLOBS_MEDIA_LAYER_GZIP,
					   &layers[i]) < 0)
				return wr_error_input(err, EINVAL,
						      "bad descriptor %s",
						      argv[5 + i]);
		_cleanup_free_ char *json = NULL;
		if ((r = blobs_manifest_build(&m, &json, err)) < 0)
			return r;
		char digest[BLOBS_DIGEST_MAX];
		if ((r = blobs_manifest_put(c, argv[3], json, strlen(json),
					    digest, err)) < 0)
			return r;
		printf("%s\n", digest);
		return 0;
	}
	if (!strcmp(cmd, "manifest-get") && argc == 4) {
		_cleanup_free_ char *json = NULL;
		size_t len;
		char digest[BLOBS_DIGEST_MAX];
		if ((r = blobs_manifest_get(c, argv[3], &json, &len, digest,
					    err)) < 0)
			return r;
		struct blobs_manifest m;
		if ((r = blobs_manifest_parse(json, len, &m, err)) < 0)
			return r;
		printf("digest %s\nconfig %s %" PRIu64 "\n", digest,
		       m.config.digest, m.config.size);
		for (size_t i = 0; i < m.n_layers; i++)
			printf("layer %s %s %" PRIu64 "\n",
			       m.layers[i].media_type, m.layers[i].digest,
			       m.layers[i].size);
		blobs_manifest_clear(&m);
		return 0;
	}
	if (!strcmp(cmd, "tags") && argc == 3) {
		char **tags;
		size_t n;
		if ((r = blobs_tags(c, &tags, &n, err)) < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			printf("%s\n", tags[i]);
		blobs_tags_free(tags, n);
		return 0;
	}
	if (!strcmp(cmd, "delete") && argc == 4)
		return blobs_manifest_delete(c, argv[3], err);
	return 1; /* usage */
}

int main(int argc, char **argv)
{
	wr_json_alloc_init();
	if (argc < 3)
		return usage();
	json_error_t jerr;
	json_t *doc = json_load_file(argv[1], 0, &jerr);
	if (!doc) {
		fprintf(stderr, "blobs_tool: %s: %s\n", argv[1], jerr.text);
		return 1;
	}
	struct wr_error *err = NULL;
	struct blobs_config cfg;
	struct blobs_client *c = NULL;
	int r = blobs_config_parse(doc, &cfg, &err);
	json_decref(doc);
	if (r == 0) {
		r = blobs_client_new(&cfg, &c, &err);
		blobs_config_clear(&cfg);
	}
	if (r == 0) {
		r = run(c, argc, argv, &err);
		if (r == 1) {
			blobs_client_free(c);
			return usage();
		}
	}
	blobs_client_free(c);
	if (r < 0) {
		fprintf(stderr, "blobs_tool: %s\n",
			err ? err->msg : strerror(-r));
		wr_error_free(err);
		return 1;
	}
	return 0;
}
