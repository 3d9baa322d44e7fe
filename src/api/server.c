/* server.c - libmicrohttpd glue: the listening socket, one request's
 * state (raw target, body with its cap), the answer, and the event stream.
 *
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION
 * with an internal polling thread that accepts), so a handler and an event
 * stream may block without holding up other clients. So that no client can
 * hold them all: at most max_per_client connections per address
 * (libmicrohttpd's own limit), and a deadline for each request's headers
 * and body (deadline.c).
 *
 * The path goes to api_handle raw: libmicrohttpd's own URL argument is
 * already percent-decoded (a "%2e%2e" would arrive as ".."), so the request
 * target is taken from the URI log callback, which sees it as sent. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CONNECTION_LIMIT 1024u
#define CONNECTION_TIMEOUT_S 120u      /* an idle keep-alive connection */
#define CONNECTION_MEMORY (64u * 1024) /* request line and headers */
#define STREAM_BLOCK (16u * 1024)

/* One request, from its URI to its completion. */
struct conn_request {
	char *target; /* path?query, as sent */
	char *body;
	size_t body_len, body_cap;
	bool started;
	bool too_large; /* the body went past max_body: 413 at the end */
};

/* The connection's deadline record (MHD_OPTION_NOTIFY_CONNECTION). */
static struct api_conn_deadline *conn_deadline(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return info ? info->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		/* no record (out of memory): no deadline, as before */
		*socket_context =
		    info ? api_deadline_open(a->deadlines, info->connect_fd)
			 : NULL;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		api_deadline_close(a->deadlines, *socket_context);
		*socket_context = NULL;
	}
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	(void)conn;
	struct conn_request *cr = wr_calloc(1, sizeof(*cr));
	if (!cr)
		return NULL;
	cr->target = wr_strdup(uri ? uri : "");
	if (!cr->target) {
		free(cr);
		return NULL;
	}
	return cr;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api *a = cls;
	(void)toe;
	if (a->deadlines)
		api_deadline_phase(a->deadlines, conn_deadline(conn),
				   API_DEADLINE_IDLE);
	struct conn_request *cr = *con_cls;
	if (cr) {
		/* a body may carry a secret's value (PUT /secrets/NAME) */
		if (cr->body)
			explicit_bzero(cr->body, cr->body_cap);
		free(cr->body);
		free(cr->target);
		free(cr);
	}
	*con_cls = NULL;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	ssize_t n = api_stream_read(cls, buf, max);
	if (n == API_STREAM_END)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n;
}

static void stream_free(void *cls)
{
	api_stream_free(cls);
}

static enum MHD_Result queue(struct MHD_Connection *conn, struct api *a,
			     struct api_response *res)
{
	struct MHD_Response *r = NULL;
	unsigned status = res->status;
	if (res->stream) {
		struct api_stream *s =
		    res->stream_sessions
			? api_stream_new_sessions(a, res->stream_user)
			: api_stream_new(a, res->stream_session,
					 res->stream_after);
		if (s) {
			r = MHD_create_response_from_callback(
			    MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_reader, s,
			    stream_free);
			if (!r)
				api_stream_free(s);
		}
		if (r) {
			MHD_add_response_header(r, "Cache-Control", "no-cache");
			/* proxies such as nginx must pass events on at once */
			MHD_add_response_header(r, "X-Accel-Buffering", "no");
		}
	} else if (res->file) {
		/* libmicrohttpd reads the file as it sends (sendfile where it
		 * can) and closes the descriptor with the response */
		r = MHD_create_response_from_fd64(res->file_size, res->file_fd);
		if (r) {
			res->file = false;
			/* an artifact is shown as its media type says, never
			 * as what a browser guesses from its bytes */
			if (!res->web) /* added below with the others */
				MHD_add_response_header(
				    r, "X-Content-Type-Options", "nosniff");
		}
	} else if (res->body) {
		r = MHD_create_response_from_buffer(res->body_len, res->body,
						    MHD_RESPMEM_MUST_FREE);
		if (r)
			res->body = NULL; /* libmicrohttpd frees it */
	} else {
		r = MHD_create_response_from_buffer(0, (void *)"",
						    MHD_RESPMEM_PERSISTENT);
	}
	if (!r) {
		api_log(WR_LOG_ERROR, "create a response: out of memory");
		return MHD_NO; /* drops the connection */
	}
	if (res->content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					res->content_type);
	if (res->web) {
		/* the page runs our scripts only and talks to us only;
		 * screenshots are shown from blob: URLs (fetched with the
		 * token) */
		MHD_add_response_header(
		    r, "Content-Security-Policy",
		    "default-src 'self'; script-src 'self'; style-src 'self'; "
		    "img-src 'self' blob: data:; connect-src 'self'; "
		    "object-src 'none'; base-uri 'none'; "
		    "frame-ancestors 'none'; form-action 'self'");
		MHD_add_response_header(r, "X-Frame-Options", "DENY");
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
		MHD_add_response_header(r, "X-Content-Type-Options",
					"nosniff");
		MHD_add_response_header(r, "Cache-Control", "no-cache");
	}
	if (res->allow[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, res->allow);
	if (status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_too_large(struct MHD_Connection *conn,
				       struct api *a)
{
	struct api_response res = {0};
	api_reply_error(&res, 413, "the body exceeds %zu bytes", a->max_body);
	enum MHD_Result ret = queue(conn, a, &res);
	api_response_clear(&res);
	return ret;
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* Collects the body; false once it is past the cap (the rest is read
 * and dropped, and the answer is 413). */
static bool body_append(struct conn_request *cr, size_t max, const char *data,
			size_t len)
{
	if (cr->too_large)
		return false;
	if (len > max - cr->body_len) {
		cr->too_large = true;
		if (cr->body)
			explicit_bzero(cr->body, cr->body_cap);
		free(cr->body);
		cr->body = NULL;
		cr->body_len = cr->body_cap = 0;
		return false;
	}
	if (cr->body_len + len > cr->body_cap) {
		size_t cap = cr->body_cap ? cr->body_cap : 1024;
		while (cap < cr->body_len + len)
			cap *= 2;
		if (cap > max)
			cap = max;
		/* not realloc: the old block is wiped before it is freed */
		char *bigger = wr_malloc(cap);
		if (!bigger)
			return false;
		if (cr->body) {
			memcpy(bigger, cr->body, cr->body_len);
			explicit_bzero(cr->body, cr->body_cap);
			free(cr->body);
		}
		cr->body = bigger;
		cr->body_cap = cap;
	}
	memcpy(cr->body + cr->body_len, data, len);
	cr->body_len += len;
	return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	(void)url;
	(void)version;
	struct api *a = cls;
	struct conn_request *cr = *con_cls;
	if (!cr)
		return MHD_NO; /* on_uri ran out of memory: drop it */

	if (!cr->started) {
		cr->started = true;
		/* the headers are in; now the body has its deadline */
		if (a->deadlines)
			api_deadline_phase(a->deadlines, conn_deadline(conn),
					   API_DEADLINE_BODY);
		/* A declared length past the cap is refused before the body
		 * is read (libmicrohttpd then closes the connection). */
		const char *len = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
		uint64_t n;
		if (len && wr_parse_uint(len, 0, UINT64_MAX, &n) == 0 &&
		    n > a->max_body)
			return reply_too_large(conn, a);
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (!body_append(cr, a->max_body, upload_data,
				 *upload_data_size) &&
		    !cr->too_large)
			return MHD_NO; /* out of memory */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (a->deadlines)
		api_deadline_phase(a->deadlines, conn_deadline(conn),
				   API_DEADLINE_ANSWER);
	if (cr->too_large)
		return reply_too_large(conn, a);

	char *query = strchr(cr->target, '?');
	if (query)
		*query++ = '\0';
	struct api_request req = {
	    .method = method,
	    .path = cr->target,
	    .query = query,
	    .authorization = header(conn, MHD_HTTP_HEADER_AUTHORIZATION),
	    .content_type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE),
	    .last_event_id = header(conn, "Last-Event-ID"),
	    .slack_signature = header(conn, "X-Slack-Signature"),
	    .slack_timestamp = header(conn, "X-Slack-Request-Timestamp"),
	    .body = cr->body,
	    .body_len = cr->body_len,
	};
	struct api_response res;
	api_handle(a, &req, &res);
	if (wr_log_enabled(WR_LOG_DEBUG)) {
		/* the path only, never the query (cut off above) */
		char m[80], path[80];
		api_log(WR_LOG_DEBUG, "%s %s: %u", api_quote(method, m),
			api_quote(cr->target, path), res.status);
	}
	enum MHD_Result ret = queue(conn, a, &res);
	api_response_clear(&res);
	return ret;
}

int api_new(const struct api_config *cfg, struct api **out,
	    struct wr_error **err)
{
	if (!cfg || !cfg->st || !cfg->ctl)
		return wr_error_set(err, EINVAL, "api: no store or control");
	if (cfg->slack && !cfg->slack_outbox)
		return wr_error_set(err, EINVAL,
				    "api: Slack without an outbox");
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "api: initialize libsodium");
	struct api *a = wr_calloc(1, sizeof(*a));
	if (!a)
		return wr_error_set(err, ENOMEM, "api");
	a->st = cfg->st;
	a->ctl = cfg->ctl;
	a->blobs = cfg->blobs;
	a->max_body = cfg->max_body ? cfg->max_body : API_MAX_BODY_DEFAULT;
	a->keepalive_ms = cfg->keepalive_ms > 0 ? cfg->keepalive_ms
						: API_KEEPALIVE_MS_DEFAULT;
	if (cfg->data_dir) {
		a->data_dir = wr_strdup(cfg->data_dir);
		if (!a->data_dir) {
			free(a);
			return wr_error_set(err, ENOMEM, "api");
		}
	}
	a->web_dir_fd = -1;
	a->slack = cfg->slack;
	a->outbox = cfg->slack_outbox;
	if (cfg->web_dir) {
		a->web_dir_fd =
		    open(cfg->web_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (a->web_dir_fd < 0) {
			int e = errno;
			free(a->data_dir);
			free(a);
			return wr_error_set(err, e, "web UI directory %s",
					    cfg->web_dir);
		}
	}
	atomic_init(&a->stopping, false);
	pthread_mutex_init(&a->cache_lock, NULL);
	*out = a;
	return 0;
}

/* A listening TCP socket on addr:port (IPv4 or IPv6 literal). */
static int listen_on(const char *addr, uint16_t port, uint16_t *bound,
		     struct wr_error **err)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	const char *fmt;
	if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		len = sizeof(*in4);
		fmt = "listen on %s:%u";
	} else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		len = sizeof(*in6);
		fmt = "listen on [%s]:%u";
	} else {
		return wr_error_input(err, 0,
				      "listen address '%s': expected an IPv4 "
				      "or IPv6 address",
				      addr);
	}
	_cleanup_close_ int fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return wr_error_set(err, errno, fmt, addr, port);
	int one = 1;
	/* a restart must not wait for the last run's TIME_WAIT sockets */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 256) < 0)
		return wr_error_set(err, errno, fmt, addr, port);
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return wr_error_set(err, errno, fmt, addr, port);
	*bound =
	    ntohs(ss.ss_family == AF_INET6 ? in6->sin6_port : in4->sin_port);
	return TAKE_FD(fd);
}

int api_start(const struct api_config *cfg, struct api **out,
	      struct wr_error **err)
{
	struct api *a = NULL;
	int r = api_new(cfg, &a, err);
	if (r < 0)
		return r;
	const char *addr = cfg->listen_addr ? cfg->listen_addr : "127.0.0.1";
	int fd = listen_on(addr, cfg->port, &a->port, err);
	if (fd < 0) {
		api_stop(a);
		return fd;
	}
	r = api_deadlines_start(
	    cfg->header_timeout_ms ? cfg->header_timeout_ms
				   : API_HEADER_TIMEOUT_MS_DEFAULT,
	    cfg->body_timeout_ms ? cfg->body_timeout_ms
				 : API_BODY_TIMEOUT_MS_DEFAULT,
	    CONNECTION_TIMEOUT_S * 1000ull, &a->deadlines);
	if (r < 0) {
		close(fd);
		api_stop(a);
		return wr_error_set(err, -r, "api: deadline watchdog");
	}
	unsigned per_client = cfg->max_per_client ? cfg->max_per_client
						  : API_MAX_PER_CLIENT_DEFAULT;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_INTERNAL_POLLING_THREAD |
			 /* poll, not select: descriptors past FD_SETSIZE */
			 MHD_USE_POLL;
	a->daemon = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, a, MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, a, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, a, MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
	    MHD_OPTION_CONNECTION_LIMIT, CONNECTION_LIMIT,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_client,
	    MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
	    MHD_OPTION_END);
	if (!a->daemon) {
		/* fd is not closed here: whether libmicrohttpd closed the
		 * socket it was given on a failed start depends on its
		 * version, and closing a number that another thread may
		 * have reused is worse than one descriptor left open on a
		 * start that failed */
		api_stop(a);
		return wr_error_set(err, EIO, "start the HTTP server on %s:%u",
				    addr, cfg->port);
	}
	*out = a;
	return 0;
}

uint16_t api_port(const struct api *a)
{
	return a ? a->port : 0;
}

void api_stop(struct api *a)
{
	if (!a)
		return;
	/* open event streams notice within a wait slice and end; stopping
	 * the daemon closes the sockets and joins every connection thread */
	atomic_store(&a->stopping, true);
	if (a->daemon)
		MHD_stop_daemon(a->daemon);
	api_deadlines_stop(a->deadlines);
	api_cache_clear(a);
	pthread_mutex_destroy(&a->cache_lock);
	if (a->web_dir_fd >= 0)
		close(a->web_dir_fd);
	free(a->data_dir);
	free(a);
}
