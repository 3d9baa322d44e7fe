/* json_alloc.c - jansson's allocator hooks (json_alloc.h). */
#include "util/json_alloc.h"

#include "util/alloc.h"

#include <jansson.h>
#include <stdlib.h>

void wr_json_alloc_init(void)
{
	/* wr_malloc is malloc underneath: free releases what it gives */
	json_set_alloc_funcs(wr_malloc, free);
}
