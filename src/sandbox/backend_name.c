/* backend_name.c - the backends' names, by enum sandbox_backend (the spec
 * parser and the command lines need them without the backends' code). */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <string.h>

static const char *const names[SANDBOX_BACKEND_MAX] = {
    [SANDBOX_BACKEND_NATIVE] = "native",
    [SANDBOX_BACKEND_GVISOR] = "gvisor",
};

const char *sandbox_backend_name(enum sandbox_backend b)
{
	return (unsigned)b < SANDBOX_BACKEND_MAX && names[b] ? names[b]
							     : "native";
}

int sandbox_backend_parse(const char *name, enum sandbox_backend *out)
{
	for (int b = 0; name && b < SANDBOX_BACKEND_MAX; b++) {
		if (names[b] && !strcmp(names[b], name)) {
			*out = (enum sandbox_backend)b;
			return 0;
		}
	}
	return -EINVAL;
}
