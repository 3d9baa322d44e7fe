/* event_kind.c - the one table of event kinds' names (event_kind.h). */
#include "store/event_kind.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static const char *const kind_names[EVENT_KIND_MAX] = {
    [EVENT_STATE] = "state",	       [EVENT_MESSAGE] = "message",
    [EVENT_PHASE] = "phase",	       [EVENT_SNAPSHOT] = "snapshot",
    [EVENT_OUTPUT] = "output",	       [EVENT_TURN] = "turn",
    [EVENT_TRANSCRIPT] = "transcript", [EVENT_USAGE] = "usage",
    [EVENT_BUDGET] = "budget",	       [EVENT_VERIFY] = "verify",
    [EVENT_RESULT] = "result",	       [EVENT_CHECKPOINT] = "checkpoint",
    [EVENT_RETRY] = "retry",	       [EVENT_SANDBOX] = "sandbox",
    [EVENT_EGRESS] = "egress",	       [EVENT_BROKER] = "broker",
    [EVENT_MODEL_CALL] = "model_call",
};

const char *event_kind_name(enum event_kind k)
{
	if ((int)k < 0 || k >= EVENT_KIND_MAX)
		return NULL;
	return kind_names[k];
}

int event_kind_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < EVENT_KIND_MAX; i++)
		if (!strcmp(name, kind_names[i]))
			return i;
	return -EINVAL;
}
