/* json_alloc.h - jansson's allocations through the one allocation path.
 *
 * Every JSON document a binary parses or builds is allocated by jansson:
 * routed through wr_malloc, WARREN_ALLOC_FAIL_AT (util/alloc.h) reaches
 * them too. Each main that links jansson (warren, warren-serve,
 * warren-client, warren-egress) calls this first, before any other
 * jansson function, as jansson requires. */
#ifndef WR_UTIL_JSON_ALLOC_H
#define WR_UTIL_JSON_ALLOC_H

void wr_json_alloc_init(void);

#endif
