/* cleanup.h - scope-bound cleanup helpers (systemd/bubblewrap style).
 *
 * _cleanup_free_, _cleanup_close_, _cleanup_fclose_ release a resource when
 * the variable leaves scope; TAKE_PTR/TAKE_FD hand ownership over explicitly.
 */
#ifndef WR_UTIL_CLEANUP_H
#define WR_UTIL_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void wr_freep(void *p)
{
	free(*(void **)p);
}

static inline void wr_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void wr_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_(fn) __attribute__((cleanup(fn)))
#define _cleanup_free_ _cleanup_(wr_freep)
#define _cleanup_close_ _cleanup_(wr_closep)
#define _cleanup_fclose_ _cleanup_(wr_fclosep)

#define TAKE_PTR(p)                         \
	({                                  \
		__typeof__(p) _taken = (p); \
		(p) = NULL;                 \
		_taken;                     \
	})

#define TAKE_FD(fd)                \
	({                         \
		int _taken = (fd); \
		(fd) = -1;         \
		_taken;            \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
