/* output.c - what the snapshot verbs print, in `warren` and in
 * warren-registry (which links this file alone of src/cli/): a JSON
 * answer, and an error said once with its exit code. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

void cli_print_json(json_t *j)
{
	char *text =
	    j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : NULL;
	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(j);
}

int cli_snapshot_fail(const char *verb, struct wr_error *err)
{
	fprintf(stderr, "warren snapshot %s: %s\n", verb,
		err && err->msg ? err->msg : "failed");
	int code = err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
	wr_error_free(err);
	return code;
}
