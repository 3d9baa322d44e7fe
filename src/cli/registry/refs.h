/* refs.h - what a control plane's store references, for the registry's
 * gc (`warren snapshot gc --store URL | --config FILE`): a reg_gc_source
 * over the store (registry/ does not link one; warren-registry does). */
#ifndef WR_CLI_REGISTRY_REFS_H
#define WR_CLI_REGISTRY_REFS_H

#include "registry/registry.h"
#include "util/error.h"

struct gc_store_source {
	struct reg_gc_source base;
	const char *url; /* borrowed */
};

/* The store's URL: store (--store), else the "store" of the serve
 * configuration file config, else DATA/warren.db when a configuration
 * without one is given (as warren serve finds it). Caller frees. */
int gc_store_url(const char *store, const char *config, const char *data_dir,
		 char **url, struct wr_error **err);

/* A source reading url when the gc asks: opened then, read, closed. An
 * SQLite file that is not there, or a store without a repository (not a
 * server's: everything would look unreferenced), is an error. */
void gc_store_source_init(struct gc_store_source *s, const char *url);

#endif
