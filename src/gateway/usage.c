/* usage.c - the usage in a model API's answer, whole or streamed
 * (gateway.h). Pure: what the upstream sent in, tokens out. */
#include "gateway/gateway.h"

#include <string.h>

/* Does text[0..len) hold needle? */
static bool holds(const char *text, size_t len, const char *needle)
{
	return memmem(text, len, needle, strlen(needle)) != NULL;
}

void gateway_scan_body(struct gateway_usage_scan *u, const char *body,
		       size_t len)
{
	if (!holds(body, len, "\"usage\""))
		return;
	json_t *doc = json_loadb(body, len, 0, NULL);
	if (meter_usage_read(u->wire, json_object_get(doc, "usage"),
			     &u->tokens))
		u->seen = true;
	json_decref(doc);
}

/* The usage object of one event's data, per wire format, or NULL. */
static const json_t *event_usage(enum meter_wire wire, const json_t *data)
{
	const char *type = json_string_value(json_object_get(data, "type"));
	switch (wire) {
	case METER_WIRE_CHAT:
		/* the last chunk, with empty choices */
		return json_object_get(data, "usage");
	case METER_WIRE_RESPONSES:
		if (type && (!strcmp(type, "response.completed") ||
			     !strcmp(type, "response.incomplete") ||
			     !strcmp(type, "response.failed")))
			return json_object_get(json_object_get(data, "response"),
					       "usage");
		return NULL;
	case METER_WIRE_MESSAGES:
		if (type && !strcmp(type, "message_start"))
			return json_object_get(json_object_get(data, "message"),
					       "usage");
		if (type && !strcmp(type, "message_delta"))
			return json_object_get(data, "usage");
		return NULL;
	default:
		return NULL;
	}
}

void gateway_scan_sse_line(struct gateway_usage_scan *u, const char *line,
			   size_t len)
{
	/* "data:" with an optional space; only lines that can hold usage
	 * are parsed (the text deltas, most of a stream, are not) */
	if (len < 5 || memcmp(line, "data:", 5) != 0)
		return;
	line += 5;
	len -= 5;
	if (len && *line == ' ') {
		line++;
		len--;
	}
	if (!holds(line, len, "\"usage\""))
		return;
	json_t *data = json_loadb(line, len, 0, NULL);
	const json_t *usage = event_usage(u->wire, data);
	if (usage && !json_is_null(usage) &&
	    meter_usage_read(u->wire, usage, &u->tokens))
		u->seen = true;
	json_decref(data);
}
