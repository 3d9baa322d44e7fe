/* backend.c - the backend table, and the public handle calls that go
 * through it.
 *
 * A backend is one row of `backends` below (and its name in
 * backend_name.c): how it creates a sandbox from
 * a checked configuration, waits for a one-off one, destroys it, and what
 * it must undo itself when a record is removed. Everything else is shared
 * by construction: the configuration and its checks (config.c), the
 * runtime records (runtime.c), the cgroup with the limits (cgroup.c),
 * removal and reaping by record (manage.c), warren-init and the exec
 * protocol (exec_client.c, proto.c). Adding a backend is adding a row. */
#include "sandbox/internal.h"

#include "util/alloc.h"

#include <errno.h>
#include <string.h>

static const struct sandbox_backend_ops *const backends[SANDBOX_BACKEND_MAX] =
    {
	[SANDBOX_BACKEND_NATIVE] = &native_backend_ops,
	[SANDBOX_BACKEND_GVISOR] = &gvisor_backend_ops,
};

const struct sandbox_backend_ops *sandbox_backend_ops(enum sandbox_backend b)
{
	return (unsigned)b < SANDBOX_BACKEND_MAX && backends[b]
		   ? backends[b]
		   : backends[SANDBOX_BACKEND_NATIVE];
}

int sandbox_backend_check(enum sandbox_backend b, struct wr_error **err)
{
	const struct sandbox_backend_ops *ops = sandbox_backend_ops(b);
	return ops->check ? ops->check(err) : 0;
}

int sandbox_create(const struct sandbox_config *cfg, enum sandbox_mode mode,
		   char *const argv[], struct sandbox **out,
		   struct wr_error **err)
{
	if ((unsigned)cfg->backend >= SANDBOX_BACKEND_MAX)
		return wr_error_input(err, EINVAL, "unknown sandbox backend");
	return sandbox_backend_ops(cfg->backend)
	    ->create(cfg, mode, argv, out, err);
}

int sandbox_run_wait(struct sandbox *sb, struct sandbox_result *res,
		     struct wr_error **err)
{
	return sandbox_backend_ops(sb->backend)->run_wait(sb, res, err);
}

int sandbox_destroy(struct sandbox *sb, struct wr_error **err)
{
	return sandbox_backend_ops(sb->backend)->destroy(sb, err);
}

void sandbox_detach(struct sandbox *sb)
{
	sandbox_free(sb);
}
