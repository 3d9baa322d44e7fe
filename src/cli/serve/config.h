/* config.h - `warren serve --config FILE`: the server's settings.
 *
 * A JSON file; every key is optional (the embedded default needs none):
 *   {"listen": "127.0.0.1:7777",
 *    "store": "postgres://warren@db.example/warren" or "sqlite:PATH" or a
 *             path (store/store.h store_open; default DATA/warren.db),
 *    "secrets_key_file": "/etc/warren/secrets.key" (security/secrets.h;
 *             default DATA/secrets.key),
 *    "limits": {"max_sandboxes": 8, "max_per_user": 0,
 *               "min_free_memory": "256M",
 *               "default": {"memory": "2G", "lifetime": "2h", "idle": "15m"},
 *               "max": {"cpus": 4, "memory": "8G", ...}},
 *    "retry": {"max": 3, "backoff": "1s"},
 *    "agent": ["sh", "-c", "..."] or "shell command line",
 *    "refresh_check": "60s",
 *    "model": {"provider": "openai" | "replay", "base_url": URL,
 *              "model": NAME, "api_key_file": PATH (0600) or
 *              "api_key_env": VAR, "stream": true, "retries": 4,
 *              "timeout": "120s", "replay": FILE,
 *              "prices": {"prompt": 0.15, "completion": 0.6},
 *              "budget": {"model_calls": 50, "tokens": 2000000,
 *                         "cost": 5.0, "wall": "30m"}},
 *    "verify": {"retries": 2},
 *    "gateway": {"port": 17077, "upstreams": {"chat_completions" |
 *                "responses" | "messages": {"base_url": URL,
 *                "api_key_file" | "api_key_env" | "api_key_secret",
 *                "models": [...]}}, "prices": {MODEL: {...}},
 *                "budget": {"tokens", "cost", "model_calls"}}
 *              (gateway/gateway.h, docs/agents.md),
 *    "blobs": {"registry": "https://registry.example", "repository":
 *              "warren/blobs", "username": NAME, "password_file": PATH
 *              (0600)} (blobs/blobs.h, docs/configuration.md),
 *    "agents": {"registry": "https://registry.npmjs.org/"}
 *              (where agent presets are installed from),
 *    "egress": {"deny": ["203.0.113.0/24"], "allow_addresses": [...],
 *               "hosts": {"name.test": "127.0.0.1"}, "ip_literals": false}
 *              (security/egress.h, docs/security.md "Egress"),
 *    "repositories": [{"name": "app", "url": "/srv/git/app.git",
 *                      "ref": "main", "refresh": "30m", "agent": ...,
 *                      "forge": {"kind": "github", "api_url": URL,
 *                                "repo": "owner/name", "token_file": PATH,
 *                                "base": "main"},
 *                      "credentials": {"username": NAME,
 *                                      "password_file": PATH (0600) or
 *                                      "password_secret": SECRET}
 *                                  or {"ssh_key_file": PATH,
 *                                      "known_hosts_file": PATH}}]}
 *   (credentials: the credential broker's, docs/security.md "Credential
 *   broker"; they never enter a sandbox)
 *    "slack": {"signing_secret_file": PATH (0600) | "signing_secret_env":
 *              VAR, "bot_token_file": PATH (0600) | "bot_token_env": VAR,
 *              "api_url": URL, "base_url": URL,
 *              "users": {"U0123ABC": {"user": "alice",
 *                                     "role": "submitter"}},
 *              "retries": 6, "retry_backoff": "5s", "timeout": "10s"}
 *   (notify/slack.h, docs/slack.md)
 * Unknown keys are an error naming the key (a typo must not silently
 * leave a limit unset). */
#ifndef WR_CLI_SERVE_CONFIG_H
#define WR_CLI_SERVE_CONFIG_H

#include "blobs/blobs.h"
#include "notify/slack.h"
#include "sched/control.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct serve_repo {
	char *name, *url, *ref, *agent_json;
	uint64_t refresh_ms;
	/* "forge": {"kind", "api_url", "repo", "token_file", "base"}: approval
	 * also opens a pull request (strings owned here) */
	bool has_forge;
	char *forge_kind, *forge_api_url, *forge_repo, *forge_token,
	    *forge_base;
	/* "credentials": {"username", "password_file" | "password_secret"}
	 * or {"ssh_key_file", "known_hosts_file"}: what the credential
	 * broker uses for the remote (security/broker.h) */
	/* "staleness": {"max_age", "max_behind"}: when a session waits for
	 * a fresh snapshot (sched/control.h, struct control_staleness) */
	bool has_staleness;
	int64_t stale_max_age_ms;
	int stale_max_behind;
	bool has_credentials;
	char *cred_username, *cred_password, *cred_password_secret,
	    *cred_ssh_key_file, *cred_known_hosts_file;
};

struct serve_model { /* strings owned here; control.model points at them */
	char *kind, *base_url, *model, *api_key, *replay_file;
};

struct serve_config {
	char *listen_addr; /* NULL: keep the command line's / default */
	uint16_t port;
	struct control_config control; /* strings owned below */
	char *agent_json;
	char *egress_json; /* "egress", checked; control.egress_json */
	char *gateway_json; /* "gateway", checked; control.gateway_json */
	char *agents_registry; /* "agents": {"registry"}; control's */
	struct serve_model model;
	/* "store": the store's URL (store_open); NULL: DATA/warren.db;
	 * --store wins */
	char *store;
	/* "secrets_key_file": the secrets' key (security/secrets.h),
	 * the same file on every host; NULL: DATA/secrets.key */
	char *secrets_key_file;
	/* "web_dir": the web UI's files; NULL: found next to the binary
	 * (serve_web_dir), "": no web UI */
	char *web_dir;
	/* "staleness": the server's default policy */
	bool has_staleness;
	int64_t stale_max_age_ms;
	int stale_max_behind;
	struct serve_repo *repos;
	size_t n_repos;
	/* "slack": the slash command, mentions and outcome posts */
	bool has_slack;
	struct slack_config slack;
	/* "blobs": the OCI registry of blobs: each snapshot built is pushed
	 * there (sched/snapshots.c) */
	bool has_blobs;
	struct blobs_config blobs;
	/* "worker": the worker's id (NULL: made from the host's name and
	 * the data directory), control.lease_ms and friends */
	char *worker_id;
	/* "api": what one client may hold (0: the API's defaults) */
	unsigned api_max_per_client;
	uint64_t api_header_timeout_ms, api_body_timeout_ms;
};

/* Defaults for everything (no file). */
void serve_config_defaults(struct serve_config *cfg);
/* Reads path into cfg (over the defaults). */
int serve_config_load(const char *path, struct serve_config *cfg,
		      struct wr_error **err);
/* "ADDR:PORT", "[v6]:PORT" or ":PORT". */
int serve_parse_listen(const char *text, char **addr, uint16_t *port,
		       struct wr_error **err);
/* A shell command line or an argv array as a JSON argv text. */
char *serve_agent_json(const json_t *v);
void serve_config_clear(struct serve_config *cfg);
/* A "prices" object at key: {"prompt": N, "completion": N, "cached": N}
 * per million tokens (cached optional). */
int serve_prices(const char *path, const char *key, const json_t *v,
		 struct meter_prices *out, struct wr_error **err);

#endif
