/* error.c - context-carrying errors. */
#include "util/error.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Used when the error itself cannot be allocated: the caller still sees the
 * errno and a fixed message instead of a crash. */
static struct wr_error oom_error = {ENOMEM, (char *)"out of memory", false};

static int error_setv_said(struct wr_error **err, int errnum, bool bad_input,
			   bool say_errno, const char *fmt, va_list ap)
{
	int ret = errnum > 0 ? -errnum : -EINVAL;
	if (!err || *err)
		return ret;
	char *text = wr_vasprintf(fmt, ap);
	struct wr_error *e = wr_malloc(sizeof(*e));
	char *msg = NULL;
	if (text && e) {
		if (errnum > 0 && say_errno)
			msg = wr_asprintf("%s: %s", text, strerror(errnum));
		else
			msg = wr_strdup(text);
	}
	free(text);
	if (!e || !msg) {
		free(e);
		free(msg);
		*err = &oom_error;
		return ret;
	}
	e->errnum = errnum;
	e->msg = msg;
	e->bad_input = bad_input;
	*err = e;
	return ret;
}

static int error_setv(struct wr_error **err, int errnum, bool bad_input,
		      const char *fmt, va_list ap)
{
	return error_setv_said(err, errnum, bad_input, true, fmt, ap);
}

int wr_error_absent(struct wr_error **err, bool bad_input, const char *fmt,
		    ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_setv_said(err, ENOENT, bad_input, false, fmt, ap);
	va_end(ap);
	return r;
}

int wr_error_set(struct wr_error **err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_setv(err, errnum, false, fmt, ap);
	va_end(ap);
	return r;
}

int wr_error_input(struct wr_error **err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = error_setv(err, errnum, true, fmt, ap);
	va_end(ap);
	return r;
}

int wr_error_wrap(struct wr_error **err, const char *fmt, ...)
{
	if (!err || !*err)
		return -EINVAL;
	struct wr_error *e = *err;
	int ret = e->errnum > 0 ? -e->errnum : -EINVAL;
	if (e == &oom_error)
		return ret;
	va_list ap;
	va_start(ap, fmt);
	char *prefix = wr_vasprintf(fmt, ap);
	va_end(ap);
	if (!prefix)
		return ret;
	char *msg = wr_asprintf("%s: %s", prefix, e->msg);
	free(prefix);
	if (msg) {
		free(e->msg);
		e->msg = msg;
	}
	return ret;
}

void wr_error_free(struct wr_error *err)
{
	if (!err || err == &oom_error)
		return;
	free(err->msg);
	free(err);
}

void wr_error_freep(struct wr_error **err)
{
	wr_error_free(*err);
	*err = NULL;
}
