/* event_kind.h - the kinds of a session's events, and their names.
 *
 * The names are a contract: they are what the events table holds and
 * what the API sends (an event's "kind", the SSE stream's "event:" line;
 * docs/api.md, "Event"). They live in this one table; code that writes an
 * event names its kind with the enum, and code that reads one back parses
 * the stored name (event_kind_parse), since a database written by another
 * build may hold a name this one does not know. */
#ifndef WR_STORE_EVENT_KIND_H
#define WR_STORE_EVENT_KIND_H

enum event_kind {
	EVENT_STATE,	  /* a state transition (the store writes it) */
	EVENT_MESSAGE,	  /* a prompt or follow-up (the store writes it) */
	EVENT_PHASE,	  /* a start phase's timing */
	EVENT_SNAPSHOT,	  /* the snapshot a session waits for or starts from */
	EVENT_OUTPUT,	  /* one line of a command agent's output */
	EVENT_TURN,	  /* a turn started or finished */
	EVENT_TRANSCRIPT, /* one message of the built-in agent's conversation */
	EVENT_USAGE,	  /* the built-in agent's totals for a run */
	EVENT_BUDGET,	  /* the built-in agent stopped at a budget */
	EVENT_VERIFY,	  /* one run of the verify commands */
	EVENT_RESULT,	  /* the committed result, or why there is none */
	EVENT_CHECKPOINT, /* the workspace kept before its sandbox goes */
	EVENT_RETRY,	  /* a new sandbox after a sandbox death */
	EVENT_SANDBOX,	  /* a sandbox stopped at the server's start */
	EVENT_EGRESS,	  /* a decision of the egress proxy */
	EVENT_BROKER,	  /* a connection to the credential broker */
	EVENT_MODEL_CALL, /* a call through the model gateway, or a refusal */
	EVENT_KIND_MAX
};

/* "state", "message", ...; NULL for an out-of-range value. */
const char *event_kind_name(enum event_kind k);
/* The kind named name, or -EINVAL (NULL, or a name not in the table). */
int event_kind_parse(const char *name);

#endif
