/* probe.c - Warren's sandbox posture probe (gVisor posture-test style).
 *
 * A static binary, bound into a sandbox (--bind $PROBE:/probe:ro) and run as
 * `/probe CHECK [ARGS...]`. Each check attempts one kind of escape or
 * privilege and reports, line by line, what it tried and what the kernel
 * answered, then one final line:
 *
 *   RESULT <check> HELD            exit 0: every attempt was refused
 *   RESULT <check> ESCAPE (N)      exit 1: N attempts got through
 *   RESULT <check> ERROR (N)       exit 2: the probe could not decide
 *                                  (setup broken, unexpected state)
 *
 * "Refused" is precise: a call the seccomp filter denies must fail with the
 * filter's errno (EPERM, ENOSYS for clone3), not merely fail - a different
 * errno means the call reached the kernel, i.e. the filter has a hole. The
 * arguments are chosen so that, without the filter, most calls would return
 * something other than EPERM (or succeed harmlessly); running the probe on
 * the host as an unprivileged user shows those calls "ESCAPE", which proves
 * the probe can see a missing rule (tests/security/escape_kernel.sh does).
 *
 * A few subcommands are helpers the shell tests run on the host (listen on
 * an abstract socket, create SysV IPC objects, ...): they are marked "host".
 *
 * Build: make build/tests/probe (cc -std=c17 -D_GNU_SOURCE -O1 -static). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef FAN_CLASS_NOTIF
#define FAN_CLASS_NOTIF 0x00000000
#endif
#ifndef FAN_REPORT_FID
#define FAN_REPORT_FID 0x00000200
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

/* What Warren promises (src/sandbox/internal.h, security.c). */
#define STORE_UID 1000000000u
#define IDS_PER_SLOT 65536u
#define SLOT_UID_BASE (STORE_UID + IDS_PER_SLOT)

static const char *check_name = "?";
static int n_escape, n_error;

static void vline(const char *tag, const char *fmt, va_list ap)
{
	printf("  %s", tag);
	vprintf(fmt, ap);
	putchar('\n');
}

/* informational line */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vline("", fmt, ap);
	va_end(ap);
}

/* an attempt that got through */
static void escape(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void escape(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vline("ESCAPE: ", fmt, ap);
	va_end(ap);
	n_escape++;
}

/* Is the probe's kernel gVisor's Sentry? (WARREN_PROBE_BACKEND=gvisor,
 * else the version string the Sentry reports for every kernel.) Some
 * checks prove the same property another way there: the Sentry is a
 * kernel of its own, and what it serves is not the host's. */
static bool in_gvisor(void)
{
	const char *b = getenv("WARREN_PROBE_BACKEND");
	if (b && *b)
		return !strcmp(b, "gvisor");
	struct utsname u;
	return uname(&u) == 0 &&
	       strstr(u.version, "Sun Jan 10 15:06:54 PST 2016") != NULL;
}

/* the probe cannot decide (its own set-up failed) */
static void error_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void error_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vline("ERROR: ", fmt, ap);
	va_end(ap);
	n_error++;
}

static int finish(void)
{
	if (n_escape) {
		printf("RESULT %s ESCAPE (%d)\n", check_name, n_escape);
		return 1;
	}
	if (n_error) {
		printf("RESULT %s ERROR (%d)\n", check_name, n_error);
		return 2;
	}
	printf("RESULT %s HELD\n", check_name);
	return 0;
}

static const char *errname(int e)
{
	switch (e) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case ENOEXEC: return "ENOEXEC";
	case EBADF: return "EBADF";
	case ECHILD: return "ECHILD";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY";
	case ENOSPC: return "ENOSPC";
	case EROFS: return "EROFS";
	case ENOSYS: return "ENOSYS";
	case ENOKEY: return "ENOKEY";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case ENETUNREACH: return "ENETUNREACH";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ENONET: return "ENONET";
	default: {
		static char buf[32];
		snprintf(buf, sizeof(buf), "errno %d", e);
		return buf;
	}
	}
}

/* "Key:\tvalue" from a /proc status-like file; NULL if absent. */
static char *status_field(const char *path, const char *key, char *out,
			  size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char line[512];
	size_t klen = strlen(key);
	char *found = NULL;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			char *v = line + klen + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, len, "%s", v);
			found = out;
			break;
		}
	}
	fclose(f);
	return found;
}

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	errno = e;
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* Runs fn in a forked child (for calls that change the caller, like unshare
 * or setsid). Returns fn's result; errno is the child's. A child killed by a
 * signal sets *sig. */
static long in_child(long (*fn)(void), int *sig)
{
	fflush(stdout);
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		errno = 0;
		long r = fn();
		int res[2] = { (int)r, errno };
		if (write(p[1], res, sizeof(res)) < 0)
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	int res[2] = { -1, 0 };
	ssize_t n = read(p[0], res, sizeof(res));
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (sig)
		*sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	if (n != (ssize_t)sizeof(res)) {
		errno = EIO;
		return -2;
	}
	errno = res[1];
	return res[0];
}

/* ------------------------------------------------------------------ caps */

static const char *const cap_names[] = {
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid",
	"kill", "setgid", "setuid", "setpcap", "linux_immutable",
	"net_bind_service", "net_broadcast", "net_admin", "net_raw",
	"ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot",
	"sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
	"sys_resource", "sys_time", "sys_tty_config", "mknod", "lease",
	"audit_write", "audit_control", "setfcap", "mac_override",
	"mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read",
	"perfmon", "bpf", "checkpoint_restore",
};

static const char *cap_name(int bit)
{
	static char buf[16];
	if (bit < (int)(sizeof(cap_names) / sizeof(*cap_names)))
		return cap_names[bit];
	snprintf(buf, sizeof(buf), "cap%d", bit);
	return buf;
}

/* The kept set of src/sandbox/security.c; everything else must be gone
 * from every set, and the bounding set guarantees no exec brings it back. */
static const int kept_caps[] = {
	CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,  CAP_FSETID,
	CAP_KILL,   CAP_SETGID,       CAP_SETUID,  CAP_SETPCAP,
	CAP_SETFCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
};

static uint64_t kept_mask(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(*kept_caps); i++)
		m |= 1ULL << kept_caps[i];
	return m;
}

/* Proves: root inside holds exactly the kept capabilities (permitted,
 * effective, bounding), nothing inheritable or ambient. An extra bit (say
 * sys_admin, sys_ptrace, net_admin, mknod) is an escape route; a missing
 * kept bit is a regression (ERROR). */
static int check_caps(void)
{
	uint64_t want = kept_mask();
	if (geteuid() != 0)
		error_("euid %d: the check needs root inside the sandbox",
		       (int)geteuid());
	static const struct {
		const char *field;
		bool kept; /* must equal the kept set (else: must be 0) */
	} sets[] = {
		{ "CapPrm", true }, { "CapEff", true }, { "CapBnd", true },
		{ "CapInh", false }, { "CapAmb", false },
	};
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		char v[64];
		if (!status_field("/proc/self/status", sets[i].field, v,
				  sizeof(v))) {
			if (strcmp(sets[i].field, "CapAmb")) {
				error_("%s missing from /proc/self/status",
				       sets[i].field);
				continue;
			}
			/* a kernel that does not report the ambient set
			 * (gVisor's): ask for each capability */
			uint64_t amb = 0;
			for (int cap = 0; cap < 64; cap++) {
				int r = prctl(PR_CAP_AMBIENT,
					      PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
				if (r == 1)
					amb |= 1ULL << cap;
			}
			snprintf(v, sizeof(v), "%016llx",
				 (unsigned long long)amb);
		}
		uint64_t got = strtoull(v, NULL, 16);
		uint64_t expect = sets[i].kept ? want : 0;
		say("%s %016llx (want %016llx)", sets[i].field,
		    (unsigned long long)got, (unsigned long long)expect);
		for (int bit = 0; bit < 64; bit++) {
			uint64_t b = 1ULL << bit;
			if ((got & b) && !(expect & b))
				escape("%s holds cap_%s", sets[i].field,
				       cap_name(bit));
			else if (!(got & b) && (expect & b))
				error_("%s lacks kept cap_%s", sets[i].field,
				       cap_name(bit));
		}
	}
	/* the bounding set, asked the other way: no dropped cap is readable */
	for (int cap = 0; cap <= 40; cap++) {
		int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		bool kept = (want >> cap) & 1;
		if (r == 1 && !kept)
			escape("PR_CAPBSET_READ: cap_%s still in the bounding set",
			       cap_name(cap));
	}
	return finish();
}

/* --------------------------------------------------------------- seccomp */

static int release_pipe[2];
/* what each thread itself says of no_new_privs and its seccomp mode (a
 * kernel whose status files lack the NoNewPrivs line - gVisor's - is
 * asked this way) */
static int thread_nnp[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
static int thread_mode[8] = {-1, -1, -1, -1, -1, -1, -1, -1};

static void *idle_thread(void *arg)
{
	int i = (int)(intptr_t)arg;
	thread_nnp[i] = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	thread_mode[i] = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	char c;
	while (read(release_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* Proves: every thread (not only the main one) runs under the filter with
 * no_new_privs - a thread without them would be a way around every rule. */
static int check_seccomp(void)
{
	if (pipe(release_pipe) < 0) {
		error_("pipe: %s", strerror(errno));
		return finish();
	}
	enum { N_THREADS = 3 };
	pthread_t th[N_THREADS];
	int started = 0;
	for (int i = 0; i < N_THREADS; i++) {
		if (pthread_create(&th[i], NULL, idle_thread,
				   (void *)(intptr_t)i) == 0)
			started++;
	}
	if (started != N_THREADS)
		error_("started %d of %d threads", started, N_THREADS);
	/* each thread asks prctl itself before it blocks */
	for (int tries = 0; tries < 2000; tries++) {
		bool all = true;
		for (int i = 0; i < started; i++)
			all &= thread_nnp[i] != -1;
		if (all)
			break;
		usleep(1000);
	}
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	say("prctl: seccomp mode %d, no_new_privs %d", mode, nnp);
	if (mode != 2)
		escape("PR_GET_SECCOMP = %d, want 2 (filter)", mode);
	if (nnp != 1)
		escape("PR_GET_NO_NEW_PRIVS = %d, want 1", nnp);
	DIR *d = opendir("/proc/self/task");
	int tasks = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		tasks++;
		char path[300], sc[32] = "", nn[32] = "", filters[32] = "?";
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 de->d_name);
		status_field(path, "Seccomp", sc, sizeof(sc));
		status_field(path, "NoNewPrivs", nn, sizeof(nn));
		status_field(path, "Seccomp_filters", filters, sizeof(filters));
		say("task %s: Seccomp %s, NoNewPrivs %s, filters %s",
		    de->d_name, sc, nn, filters);
		if (strcmp(sc, "2"))
			escape("task %s: Seccomp %s, want 2", de->d_name, sc);
		if (!nn[0]) {
			/* not reported: every thread's own prctl instead */
			for (int i = 0; i < started; i++) {
				if (thread_nnp[i] != 1 || thread_mode[i] != 2)
					escape("thread %d: prctl says "
					       "no_new_privs %d, seccomp %d",
					       i, thread_nnp[i], thread_mode[i]);
			}
			if (nnp == 1)
				continue;
		}
		if (strcmp(nn, "1"))
			escape("task %s: NoNewPrivs %s, want 1", de->d_name, nn);
	}
	if (d)
		closedir(d);
	if (tasks != started + 1)
		error_("saw %d tasks, expected %d", tasks, started + 1);
	close(release_pipe[1]);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return finish();
}

/* -------------------------------------------------------------- syscalls */

/* Each returns the raw result (errno set); fds it gets are closed. Comments
 * say what the call would return with no filter, for an unprivileged
 * caller: "cap" means the kernel would also say EPERM (a capability check
 * comes first), so only the filter's coverage is shown there. */
static long close_if_fd(long r)
{
	if (r >= 0) {
		int e = errno;
		close((int)r);
		errno = e;
	}
	return r;
}

static long c_init_module(void)
{ /* cap */
	return syscall(SYS_init_module, NULL, 0UL, "");
}
static long c_finit_module(void)
{ /* cap; a real fd, the module file would be this ELF */
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	long r = syscall(SYS_finit_module, fd, "", 0);
	int e = errno;
	if (fd >= 0)
		close(fd);
	errno = e;
	return r;
}
static long c_delete_module(void)
{ /* cap */
	return syscall(SYS_delete_module, "warren_probe_none", O_NONBLOCK);
}
static long c_kexec_load(void)
{ /* cap; bad flags besides */
	return syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL);
}
static long c_kexec_file_load(void)
{ /* cap */
	return syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 0xdead0000UL);
}
static long c_bpf(void)
{ /* EINVAL (bad command) or EPERM (unprivileged_bpf_disabled) */
	return syscall(SYS_bpf, 0x7fff, NULL, 0);
}
static long c_perf_event_open(void)
{ /* EFAULT: the attr pointer is read first */
	return close_if_fd(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
}
static long c_userfaultfd(void)
{ /* succeeds: user-mode-only userfaultfd needs no privilege */
	return close_if_fd(
		syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
}
static long c_keyctl(void)
{ /* ENOKEY: no thread keyring, and we do not ask to create one */
	return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */,
		       -1 /* KEY_SPEC_THREAD_KEYRING */, 0);
}
static long c_add_key(void)
{ /* EFAULT */
	return syscall(SYS_add_key, NULL, NULL, NULL, 0, 0);
}
static long c_request_key(void)
{ /* EFAULT */
	return syscall(SYS_request_key, NULL, NULL, NULL, 0);
}
static long c_io_uring_setup(void)
{ /* EFAULT */
	return close_if_fd(syscall(SYS_io_uring_setup, 1, NULL));
}
static long c_io_uring_enter(void)
{ /* EBADF */
	return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
}
static long c_io_uring_register(void)
{ /* EBADF */
	return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
}
static long c_mount(void)
{ /* ENOENT: the target is looked up before the privilege check */
	return syscall(SYS_mount, "none", "/nonexistent-warren-probe", "tmpfs",
		       0UL, NULL);
}
static long c_umount2(void)
{ /* ENOENT, likewise */
	return syscall(SYS_umount2, "/nonexistent-warren-probe", 0);
}
static long c_pivot_root(void)
{ /* cap */
	return syscall(SYS_pivot_root, "/nonexistent-warren-probe",
		       "/nonexistent-warren-probe");
}
static long c_move_mount(void)
{ /* cap */
	return syscall(SYS_move_mount, -1, "", -1, "", 0);
}
static long c_open_tree(void)
{ /* succeeds: a plain (non-clone) open_tree is an O_PATH open */
	return close_if_fd(syscall(SYS_open_tree, AT_FDCWD, "/", 0));
}
static long c_fsopen(void)
{ /* cap */
	return close_if_fd(syscall(SYS_fsopen, "tmpfs", 0));
}
static long c_fsconfig(void)
{ /* EINVAL/EBADF */
	return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0);
}
static long c_fsmount(void)
{ /* cap */
	return close_if_fd(syscall(SYS_fsmount, -1, 0, 0));
}
static long c_fspick(void)
{ /* cap */
	return close_if_fd(
		syscall(SYS_fspick, AT_FDCWD, "/nonexistent-warren-probe", 0));
}
static long c_mount_setattr(void)
{ /* EINVAL: size 0 */
	return syscall(SYS_mount_setattr, -1, "", 0, NULL, 0);
}
static long c_open_by_handle_at(void)
{ /* EBADF/EFAULT or cap */
	return close_if_fd(syscall(SYS_open_by_handle_at, -1, NULL, O_RDONLY));
}
static long c_name_to_handle_at(void)
{ /* EOVERFLOW: a zero-sized handle buffer; needs no privilege */
	struct {
		unsigned int handle_bytes;
		int handle_type;
		unsigned char f_handle[8];
	} fh = { 0, 0, { 0 } };
	int mount_id;
	return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mount_id, 0);
}
static long c_reboot(void)
{ /* cap; the magic numbers are wrong besides */
	return syscall(SYS_reboot, 0, 0, 0, NULL);
}
static long c_swapon(void)
{ /* cap */
	return syscall(SYS_swapon, "/nonexistent-warren-probe", 0);
}
static long c_swapoff(void)
{ /* cap */
	return syscall(SYS_swapoff, "/nonexistent-warren-probe");
}
static long c_settimeofday(void)
{ /* succeeds: both NULL is a no-op */
	return syscall(SYS_settimeofday, NULL, NULL);
}
static long c_clock_settime(void)
{ /* EINVAL: the monotonic clock cannot be set */
	struct timespec ts = { 0, 0 };
	return syscall(SYS_clock_settime, CLOCK_MONOTONIC, &ts);
}
static long c_clock_adjtime(void)
{ /* succeeds: modes 0 only reads */
	struct timex tx;
	memset(&tx, 0, sizeof(tx));
	return syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx);
}
static long c_adjtimex(void)
{ /* succeeds: modes 0 only reads */
	struct timex tx;
	memset(&tx, 0, sizeof(tx));
	return syscall(SYS_adjtimex, &tx);
}
static long c_acct(void)
{ /* cap */
	return syscall(SYS_acct, NULL);
}
static long c_quotactl(void)
{ /* EINVAL/EFAULT/ENODEV */
	return syscall(SYS_quotactl, 0, NULL, 0, NULL);
}
static long c_quotactl_fd(void)
{ /* EBADF */
	return syscall(SYS_quotactl_fd, -1, 0, 0, NULL);
}
static long c_syslog(void)
{ /* the buffer size: allowed unless dmesg_restrict */
	return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
}
static long c_iopl(void)
{ /* succeeds: level 0 needs no privilege */
	return syscall(SYS_iopl, 0);
}
static long c_ioperm(void)
{ /* EINVAL: empty range */
	return syscall(SYS_ioperm, 0UL, 0UL, 0);
}
static long c_vhangup(void)
{ /* cap; run in a child with no controlling terminal anyway */
	setsid();
	return syscall(SYS_vhangup);
}
static long c_uselib(void)
{ /* ENOSYS/EFAULT */
	return syscall(SYS_uselib, NULL);
}
static long c_nfsservctl(void)
{ /* ENOSYS */
	return syscall(SYS_nfsservctl, 0, NULL, NULL);
}
static long c_lookup_dcookie(void)
{ /* ENOSYS/EINVAL */
	return syscall(SYS_lookup_dcookie, 0ULL, NULL, 0UL);
}
static long c_fanotify_init(void)
{ /* succeeds: unprivileged fanotify with FID reporting (5.13+) */
	return close_if_fd(syscall(SYS_fanotify_init,
				   FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY));
}
static long c_setns(void)
{ /* EBADF */
	return syscall(SYS_setns, -1, 0);
}

/* user namespaces: in a child (success changes the caller) */
static long c_unshare_user(void)
{
	return syscall(SYS_unshare, CLONE_NEWUSER);
}
static long c_unshare_user_mnt(void)
{
	return syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS);
}
static long clone_raw(unsigned long flags)
{
	long r = syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (r == 0)
		_exit(0); /* the new process: nothing to do */
	if (r > 0) {
		waitpid((pid_t)r, NULL, 0);
		return 0;
	}
	return r;
}
static long c_clone_user(void)
{
	return clone_raw(CLONE_NEWUSER | SIGCHLD);
}
static long c_clone_user_highbits(void)
{
	/* the kernel ignores the upper 32 bits of clone's flags: a filter
	 * comparing all 64 bits for equality would be dodged */
	return clone_raw((1UL << 32) | CLONE_NEWUSER | SIGCHLD);
}
struct probe_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
		stack_size, tls;
};
static long c_clone3_null(void)
{ /* EINVAL without the filter (size 0) */
	return syscall(SYS_clone3, NULL, 0);
}
static long c_clone3_user(void)
{
	struct probe_clone_args a;
	memset(&a, 0, sizeof(a));
	a.flags = CLONE_NEWUSER;
	a.exit_signal = SIGCHLD;
	long r = syscall(SYS_clone3, &a, sizeof(a));
	if (r == 0)
		_exit(0);
	if (r > 0) {
		waitpid((pid_t)r, NULL, 0);
		return 0;
	}
	return r;
}

struct sc_case {
	const char *name;
	long (*fn)(void);
	int want;      /* errno the filter returns */
	bool child;    /* run in a forked child */
	bool userns;   /* creates a user namespace (see --userns-allowed) */
};

static const struct sc_case sc_cases[] = {
	{ "init_module", c_init_module, EPERM, false, false },
	{ "finit_module", c_finit_module, EPERM, false, false },
	{ "delete_module", c_delete_module, EPERM, false, false },
	{ "kexec_load", c_kexec_load, EPERM, false, false },
	{ "kexec_file_load", c_kexec_file_load, EPERM, false, false },
	{ "bpf", c_bpf, EPERM, false, false },
	{ "perf_event_open", c_perf_event_open, EPERM, false, false },
	{ "userfaultfd", c_userfaultfd, EPERM, false, false },
	{ "keyctl", c_keyctl, EPERM, false, false },
	{ "add_key", c_add_key, EPERM, false, false },
	{ "request_key", c_request_key, EPERM, false, false },
	{ "io_uring_setup", c_io_uring_setup, EPERM, false, false },
	{ "io_uring_enter", c_io_uring_enter, EPERM, false, false },
	{ "io_uring_register", c_io_uring_register, EPERM, false, false },
	{ "mount", c_mount, EPERM, false, false },
	{ "umount2", c_umount2, EPERM, false, false },
	{ "pivot_root", c_pivot_root, EPERM, false, false },
	{ "move_mount", c_move_mount, EPERM, false, false },
	{ "open_tree", c_open_tree, EPERM, false, false },
	{ "fsopen", c_fsopen, EPERM, false, false },
	{ "fsconfig", c_fsconfig, EPERM, false, false },
	{ "fsmount", c_fsmount, EPERM, false, false },
	{ "fspick", c_fspick, EPERM, false, false },
	{ "mount_setattr", c_mount_setattr, EPERM, false, false },
	{ "open_by_handle_at", c_open_by_handle_at, EPERM, false, false },
	{ "name_to_handle_at", c_name_to_handle_at, EPERM, false, false },
	{ "reboot", c_reboot, EPERM, false, false },
	{ "swapon", c_swapon, EPERM, false, false },
	{ "swapoff", c_swapoff, EPERM, false, false },
	{ "settimeofday", c_settimeofday, EPERM, false, false },
	{ "clock_settime", c_clock_settime, EPERM, false, false },
	{ "clock_adjtime", c_clock_adjtime, EPERM, false, false },
	{ "adjtimex", c_adjtimex, EPERM, false, false },
	{ "acct", c_acct, EPERM, false, false },
	{ "quotactl", c_quotactl, EPERM, false, false },
	{ "quotactl_fd", c_quotactl_fd, EPERM, false, false },
	{ "syslog", c_syslog, EPERM, false, false },
	{ "iopl", c_iopl, EPERM, false, false },
	{ "ioperm", c_ioperm, EPERM, false, false },
	{ "vhangup", c_vhangup, EPERM, true, false },
	{ "uselib", c_uselib, EPERM, false, false },
	{ "nfsservctl", c_nfsservctl, EPERM, false, false },
	{ "lookup_dcookie", c_lookup_dcookie, EPERM, false, false },
	{ "fanotify_init", c_fanotify_init, EPERM, false, false },
	{ "setns", c_setns, EPERM, false, false },
	{ "unshare(CLONE_NEWUSER)", c_unshare_user, EPERM, true, true },
	{ "unshare(CLONE_NEWUSER|CLONE_NEWNS)", c_unshare_user_mnt, EPERM, true,
	  true },
	{ "clone(CLONE_NEWUSER)", c_clone_user, EPERM, true, true },
	{ "clone(1<<32|CLONE_NEWUSER)", c_clone_user_highbits, EPERM, true,
	  true },
	{ "clone3(NULL, 0)", c_clone3_null, ENOSYS, false, false },
	{ "clone3(CLONE_NEWUSER)", c_clone3_user, ENOSYS, true, true },
};

/* Proves: every call on Warren's deny list is answered by the filter (EPERM;
 * ENOSYS for clone3, so libc falls back to the checkable clone). With
 * --userns-allowed (a sandbox made with --allow-userns), creating a user
 * namespace must work and everything else stays denied. */
static int check_syscalls(int argc, char **argv)
{
	bool userns_allowed = argc > 0 && !strcmp(argv[0], "--userns-allowed");
	for (size_t i = 0; i < sizeof(sc_cases) / sizeof(*sc_cases); i++) {
		const struct sc_case *c = &sc_cases[i];
		if (userns_allowed && !strcmp(c->name, "clone3(NULL, 0)"))
			continue; /* no clone3 rule without the userns rules */
		int sig = 0;
		errno = 0;
		long r = c->child ? in_child(c->fn, &sig) : c->fn();
		int e = errno;
		if (sig) {
			escape("%-36s killed by signal %d", c->name, sig);
			continue;
		}
		if (r == -2 && c->child) {
			error_("%-36s child failed to report", c->name);
			continue;
		}
		if (userns_allowed && c->userns) {
			if (r >= 0)
				say("%-36s allowed (--allow-userns)", c->name);
			else
				error_("%-36s %s, but --allow-userns should "
				       "allow it",
				       c->name, errname(e));
			continue;
		}
		if (r >= 0)
			escape("%-36s returned %ld: not refused", c->name, r);
		else if (e != c->want)
			escape("%-36s %s: reached the kernel (want %s from the "
			       "filter)",
			       c->name, errname(e), errname(c->want));
		else
			say("%-36s %s", c->name, errname(e));
	}
	return finish();
}

/* Proves: loading a kernel module is refused, with a real module image and
 * a real file descriptor (what insmod does). */
static int check_module(void)
{
	char buf[4096];
	ssize_t n = read_small("/proc/self/exe", buf, sizeof(buf));
	if (n <= 0) {
		error_("read /proc/self/exe: %s", strerror(errno));
		return finish();
	}
	errno = 0;
	long r = syscall(SYS_init_module, buf, (unsigned long)n, "");
	int e = errno;
	if (r == 0 || e != EPERM)
		escape("init_module(image): %s, want EPERM",
		       r == 0 ? "loaded" : errname(e));
	else
		say("init_module(image): EPERM");
	errno = 0;
	r = c_finit_module();
	e = errno;
	if (r == 0 || e != EPERM)
		escape("finit_module(fd): %s, want EPERM",
		       r == 0 ? "loaded" : errname(e));
	else
		say("finit_module(fd): EPERM");
	return finish();
}

/* ----------------------------------------------------------------- mknod */

/* Proves: no device node can be created anywhere writable (no CAP_MKNOD,
 * /dev read-only): a block device node of the host's disk would be a
 * direct path to host data. A FIFO in /tmp must work, so the refusals are
 * about devices, not about a read-only directory. */
static int check_mknod(void)
{
	char cwd_path[PATH_MAX + 32] = "";
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof(cwd)))
		snprintf(cwd_path, sizeof(cwd_path), "%s/.probe-mknod",
			 strcmp(cwd, "/") ? cwd : "");
	const char *dirs_paths[] = { "/tmp/.probe-mknod", "/dev/shm/.probe-mknod",
				     "/dev/.probe-mknod", "/.probe-mknod",
				     cwd_path };
	struct {
		const char *what;
		mode_t type;
		dev_t dev;
	} nodes[] = {
		{ "char 1:3 (null)", S_IFCHR, makedev(1, 3) },
		{ "char 1:1 (mem)", S_IFCHR, makedev(1, 1) },
		{ "block 8:0 (sda)", S_IFBLK, makedev(8, 0) },
		{ "block 254:0 (vda)", S_IFBLK, makedev(254, 0) },
	};
	for (size_t d = 0; d < sizeof(dirs_paths) / sizeof(*dirs_paths); d++) {
		const char *p = dirs_paths[d];
		if (!p[0])
			continue;
		for (size_t i = 0; i < sizeof(nodes) / sizeof(*nodes); i++) {
			unlink(p);
			if (mknod(p, nodes[i].type | 0600, nodes[i].dev) == 0) {
				escape("mknod %s %s succeeded", p, nodes[i].what);
				unlink(p);
			} else {
				say("mknod %s %s: %s", p, nodes[i].what,
				    errname(errno));
			}
		}
	}
	if (mkfifo("/tmp/.probe-fifo", 0600) < 0)
		error_("mkfifo /tmp/.probe-fifo: %s (is /tmp writable?)",
		       errname(errno));
	unlink("/tmp/.probe-fifo");
	return finish();
}

/* Proves: device nodes that exist inside (planted in a layer, or in a bound
 * host directory) cannot be opened: every such mount is nodev. */
static int check_opendev(int argc, char **argv)
{
	if (argc < 1) {
		error_("usage: opendev PATH...");
		return finish();
	}
	for (int i = 0; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			if (errno == EPERM && in_gvisor()) {
				/* the gofer serves no device file of the
				 * host's at all */
				say("%s: EPERM (gVisor serves no host device)",
				    argv[i]);
				continue;
			}
			error_("%s: %s (test set-up?)", argv[i], errname(errno));
			continue;
		}
		if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
			error_("%s is not a device node", argv[i]);
			continue;
		}
		int fd = open(argv[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			char c;
			ssize_t n = read(fd, &c, 1);
			escape("opened %s (%s %u:%u), read returned %zd",
			       argv[i], S_ISBLK(st.st_mode) ? "block" : "char",
			       major(st.st_rdev), minor(st.st_rdev), n);
			close(fd);
		} else {
			say("open %s: %s", argv[i], errname(errno));
		}
	}
	return finish();
}

/* ---------------------------------------------------------------- tiocsti */

struct tty_result {
	long r[3];
	int e[3];
	int setup_errno;
	char step[32];
};

/* Proves: TIOCSTI (push input into a terminal, CVE-2017-5226) and TIOCLINUX
 * are refused by the filter even on our own controlling terminal, where the
 * kernel itself would allow TIOCSTI (dev.tty.legacy_tiocsti=1); also with
 * garbage in the upper 32 bits of the command, which the kernel ignores. */
static int check_tiocsti(void)
{
	int p[2];
	if (pipe(p) < 0) {
		error_("pipe: %s", strerror(errno));
		return finish();
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct tty_result res;
		memset(&res, 0, sizeof(res));
		char name[64];
		int m = -1, s = -1;
		setsid();
		snprintf(res.step, sizeof(res.step), "posix_openpt");
		m = posix_openpt(O_RDWR | O_NOCTTY);
		if (m >= 0) {
			snprintf(res.step, sizeof(res.step), "grantpt");
			if (grantpt(m) == 0 && unlockpt(m) == 0 &&
			    ptsname_r(m, name, sizeof(name)) == 0) {
				snprintf(res.step, sizeof(res.step), "open slave");
				s = open(name, O_RDWR);
			}
		}
		if (s < 0) {
			res.setup_errno = errno ? errno : EIO;
		} else {
			ioctl(s, TIOCSCTTY, 0); /* usually already ours */
			char c = '#';
			errno = 0;
			res.r[0] = ioctl(s, TIOCSTI, &c);
			res.e[0] = errno;
			errno = 0;
			res.r[1] = syscall(SYS_ioctl, s,
					   (1UL << 32) | (unsigned long)TIOCSTI, &c);
			res.e[1] = errno;
			char sub = 0;
			errno = 0;
			res.r[2] = ioctl(s, TIOCLINUX, &sub);
			res.e[2] = errno;
		}
		if (write(p[1], &res, sizeof(res)) < 0)
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	struct tty_result res;
	ssize_t n = read(p[0], &res, sizeof(res));
	close(p[0]);
	waitpid(pid, NULL, 0);
	if (n != (ssize_t)sizeof(res)) {
		error_("child did not report");
		return finish();
	}
	if (res.setup_errno) {
		error_("pty set-up failed at %s: %s", res.step,
		       errname(res.setup_errno));
		return finish();
	}
	static const char *const what[3] = {
		"TIOCSTI on own controlling pty",
		"TIOCSTI|1<<32 on own controlling pty",
		"TIOCLINUX on own controlling pty",
	};
	for (int i = 0; i < 3; i++) {
		if (res.r[i] >= 0)
			escape("%s: succeeded", what[i]);
		else if (res.e[i] != EPERM)
			escape("%s: %s: reached the kernel (want EPERM from the "
			       "filter)",
			       what[i], errname(res.e[i]));
		else
			say("%s: EPERM", what[i]);
	}
	return finish();
}

/* Proves: a sandboxed command cannot push keystrokes into the terminal it
 * inherited from the caller (fd 0), nor take it over as its controlling
 * terminal. Run with a real terminal on fd 0 (script(1)). */
static int check_tiocsti_fd0(void)
{
	if (!isatty(0)) {
		if (in_gvisor())
			/* the caller's terminal, imported into the Sentry, is
			 * no terminal inside: no ioctl reaches it */
			say("fd 0 is not a terminal inside gVisor");
		else
			error_("fd 0 is not a terminal (run under script(1))");
		return finish();
	}
	char c = '#';
	errno = 0;
	if (ioctl(0, TIOCSTI, &c) == 0)
		escape("TIOCSTI on the caller's terminal succeeded");
	else
		say("TIOCSTI on fd 0: %s", errname(errno));
	errno = 0;
	if (syscall(SYS_ioctl, 0, (1UL << 32) | (unsigned long)TIOCSTI, &c) == 0)
		escape("TIOCSTI|1<<32 on the caller's terminal succeeded");
	else
		say("TIOCSTI|1<<32 on fd 0: %s", errname(errno));
	errno = 0;
	if (ioctl(0, TIOCSCTTY, 1) == 0)
		escape("stole the caller's terminal (TIOCSCTTY 1)");
	else
		say("TIOCSCTTY(steal) on fd 0: %s", errname(errno));
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		escape("/dev/tty opened: the command has a controlling "
		       "terminal");
		close(fd);
	} else {
		say("open /dev/tty: %s (no controlling terminal)",
		    errname(errno));
	}
	return finish();
}

/* -------------------------------------------------------------------- ns */

static int count_pids(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Proves: the sandbox is in new namespaces of every kind (compared with the
 * host's inode numbers, given as NAME:INODE arguments), PID 1 is
 * warren-init, and no host process is visible (only a handful of pids). */
static int check_ns(int argc, char **argv)
{
	int max_pids = 16;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "max=", 4)) {
			max_pids = atoi(argv[i] + 4);
			continue;
		}
		char name[32];
		unsigned long long host_ino;
		if (sscanf(argv[i], "%31[^:]:%llu", name, &host_ino) != 2) {
			error_("bad argument %s (want NAME:INODE)", argv[i]);
			continue;
		}
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
		struct stat st;
		if (stat(path, &st) < 0) {
			if (errno == ENOENT && in_gvisor()) {
				/* the Sentry has no such namespace: none of
				 * the host's can be shared */
				say("%s: none under gVisor", path);
				continue;
			}
			error_("%s: %s", path, errname(errno));
			continue;
		}
		if ((unsigned long long)st.st_ino == host_ino)
			escape("%s namespace is the host's (inode %llu)", name,
			       host_ino);
		else
			say("%s namespace %llu (host %llu)", name,
			    (unsigned long long)st.st_ino, host_ino);
	}
	char cmd[256];
	ssize_t n = read_small("/proc/1/cmdline", cmd, sizeof(cmd));
	if (n <= 0)
		error_("read /proc/1/cmdline: %s", errname(errno));
	else if (strcmp(strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd,
			"warren-init"))
		escape("pid 1 is '%s', not warren-init", cmd);
	else
		say("pid 1: %s %s", cmd, cmd + strlen(cmd) + 1);
	int pids = count_pids();
	say("%d processes visible in /proc (max %d)", pids, max_pids);
	if (pids > max_pids)
		escape("%d processes visible: host processes leak in", pids);
	if (getpid() > 1000)
		escape("our pid is %d: not a fresh pid namespace", (int)getpid());
	return finish();
}

/* Proves: root inside is an unprivileged host uid of the sandbox's own
 * slot range: never host root, never the store range that owns the layers
 * on disk. */
static int check_idmap(void)
{
	if (in_gvisor()) {
		/* the Sentry's maps are its own (0 0 4294967295); which host
		 * ids the sandbox's files get is checked on the host by the
		 * tests (escape_privs.sh, escape_fs.sh) */
		say("gVisor: the host side of the mapping is checked outside");
		return finish();
	}
	const char *files[] = { "/proc/self/uid_map", "/proc/self/gid_map" };
	for (int i = 0; i < 2; i++) {
		char buf[512];
		if (read_small(files[i], buf, sizeof(buf)) < 0) {
			error_("%s: %s", files[i], errname(errno));
			continue;
		}
		unsigned long long in, out, count;
		int lines = 0;
		for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
			lines++;
			if (sscanf(l, "%llu %llu %llu", &in, &out, &count) != 3) {
				error_("%s: bad line '%s'", files[i], l);
				continue;
			}
			say("%s: %llu %llu %llu", files[i], in, out, count);
			if (out <= 0 && in + count > 0)
				escape("%s maps host id 0", files[i]);
			if (out < SLOT_UID_BASE)
				escape("%s: host range starts at %llu, below the "
				       "slot ranges (%u): store range or real "
				       "users",
				       files[i], out, SLOT_UID_BASE);
			else if ((out - SLOT_UID_BASE) % IDS_PER_SLOT)
				escape("%s: host range %llu is not a slot "
				       "boundary",
				       files[i], out);
			if (count > IDS_PER_SLOT)
				escape("%s: %llu ids mapped, more than one slot",
				       files[i], count);
			if (in != 0)
				error_("%s: inside range starts at %llu, not 0",
				       files[i], in);
		}
		if (lines != 1)
			escape("%s has %d lines, want exactly 1", files[i], lines);
	}
	return finish();
}

/* ------------------------------------------------------------------- net */

static int udp_connect(int family, const char *addr, int *err)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	int r;
	if (family == AF_INET) {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = htons(53) };
		inet_pton(AF_INET, addr, &sa.sin_addr);
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	} else {
		struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
					   .sin6_port = htons(53) };
		inet_pton(AF_INET6, addr, &sa.sin6_addr);
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	*err = r < 0 ? errno : 0;
	close(fd);
	return r;
}

/* Proves: the only interface is lo (up); there is no route anywhere else;
 * no raw or packet sockets (sniffing, spoofing) and no interface
 * configuration (CAP_NET_RAW, CAP_NET_ADMIN gone). Extra addresses to
 * try (the host's own, its gateway) may be given as arguments. */
static int check_net(int argc, char **argv)
{
	FILE *f = fopen("/proc/net/dev", "re");
	if (!f) {
		error_("/proc/net/dev: %s", errname(errno));
	} else {
		char line[512];
		int ifs = 0;
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			char *name = line;
			while (*name == ' ')
				name++;
			ifs++;
			if (strcmp(name, "lo"))
				escape("interface %s visible", name);
			else
				say("interface lo");
		}
		fclose(f);
		if (ifs == 0)
			error_("no interface at all in /proc/net/dev");
	}
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		error_("SIOCGIFFLAGS lo: %s", errname(errno));
	} else {
		if (!(ifr.ifr_flags & IFF_UP))
			error_("lo is down");
		/* setting the flags it already has: harmless if allowed */
		if (ioctl(s, SIOCSIFFLAGS, &ifr) == 0)
			escape("SIOCSIFFLAGS on lo allowed: CAP_NET_ADMIN");
		else
			say("SIOCSIFFLAGS lo: %s", errname(errno));
	}
	if (s >= 0)
		close(s);
	int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (raw >= 0) {
		escape("raw IPv4 socket created: CAP_NET_RAW");
		close(raw);
	} else {
		say("raw socket: %s", errname(errno));
	}
	int pkt = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(0x0003));
	if (pkt >= 0) {
		escape("packet socket created: CAP_NET_RAW");
		close(pkt);
	} else {
		say("packet socket: %s", errname(errno));
	}
	const char *v4[16] = { "8.8.8.8", "10.0.2.2", "192.168.1.1",
			       "169.254.169.254" };
	int n4 = 4;
	for (int i = 0; i < argc && n4 < 16; i++)
		v4[n4++] = argv[i];
	for (int i = 0; i < n4; i++) {
		int e;
		if (strchr(v4[i], ':')) {
			if (udp_connect(AF_INET6, v4[i], &e) == 0)
				escape("route to %s", v4[i]);
			else
				say("connect %s: %s", v4[i], errname(e));
			continue;
		}
		if (udp_connect(AF_INET, v4[i], &e) == 0)
			escape("route to %s", v4[i]);
		else if (e != ENETUNREACH && !(e == EHOSTUNREACH && in_gvisor()))
			escape("connect %s: %s (want ENETUNREACH)", v4[i],
			       errname(e));
		else
			say("connect %s: %s", v4[i], errname(e));
	}
	int e;
	if (udp_connect(AF_INET6, "2001:4860:4860::8888", &e) == 0)
		escape("route to 2001:4860:4860::8888");
	else
		say("connect 2001:4860:4860::8888: %s", errname(e));
	return finish();
}

/* -------------------------------------------------------------- families */

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_KCM
#define AF_KCM 41
#endif
#ifndef AF_QIPCRTR
#define AF_QIPCRTR 42
#endif
#ifndef AF_SMC
#define AF_SMC 43
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef AF_MCTP
#define AF_MCTP 45
#endif

struct family_case {
	const char *name;
	long family; /* long: some cases put garbage in the high bits */
	int type;
	long protocol;
	bool pair; /* socketpair() instead of socket() */
};

/* What the sandbox needs (security.c): unix, IPv4/IPv6 (loopback, the
 * egress proxy on 127.0.0.1) and NETLINK_ROUTE (getifaddrs: Node's
 * os.networkInterfaces(), hostname -I, ip addr). */
static const struct family_case families_allowed[] = {
	{ "unix stream", AF_UNIX, SOCK_STREAM, 0, false },
	{ "unix dgram", AF_UNIX, SOCK_DGRAM, 0, false },
	{ "unix seqpacket", AF_UNIX, SOCK_SEQPACKET, 0, false },
	{ "inet stream", AF_INET, SOCK_STREAM, 0, false },
	{ "inet dgram", AF_INET, SOCK_DGRAM, 0, false },
	{ "inet6 stream", AF_INET6, SOCK_STREAM, 0, false },
	{ "inet6 dgram", AF_INET6, SOCK_DGRAM, 0, false },
	{ "netlink route", AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */, false },
	{ "socketpair unix stream", AF_UNIX, SOCK_STREAM, 0, true },
	{ "socketpair unix dgram", AF_UNIX, SOCK_DGRAM, 0, true },
};

/* Everything else: each must get the filter's EAFNOSUPPORT. The types and
 * protocols are ones the kernel accepts, so that without the filter the
 * call succeeds or fails differently (EPERM from a capability check,
 * EPROTONOSUPPORT, ...). */
static const struct family_case families_denied[] = {
	{ "vsock stream", AF_VSOCK, SOCK_STREAM, 0, false },
	{ "vsock dgram", AF_VSOCK, SOCK_DGRAM, 0, false },
	{ "vsock seqpacket", AF_VSOCK, SOCK_SEQPACKET, 0, false },
	{ "vsock, high bits (1<<32|40)", (1L << 32) | AF_VSOCK, SOCK_STREAM, 0,
	  false },
	{ "vsock, negative high bits", (long)(~0UL << 32) | AF_VSOCK,
	  SOCK_STREAM, 0, false },
	{ "packet dgram", AF_PACKET, SOCK_DGRAM, 0, false },
	{ "netlink sock_diag", AF_NETLINK, SOCK_RAW, 4, false },
	{ "netlink audit", AF_NETLINK, SOCK_RAW, 9, false },
	{ "netlink kobject_uevent", AF_NETLINK, SOCK_RAW, 15, false },
	{ "netlink generic", AF_NETLINK, SOCK_RAW, 16, false },
	{ "netlink crypto", AF_NETLINK, SOCK_RAW, 21, false },
	{ "netlink netfilter", AF_NETLINK, SOCK_RAW, 12, false },
	{ "netlink xfrm", AF_NETLINK, SOCK_RAW, 6, false },
	{ "netlink generic, high bits (1<<32|16)", AF_NETLINK, SOCK_RAW,
	  (1L << 32) | 16, false },
	{ "alg seqpacket", AF_ALG, SOCK_SEQPACKET, 0, false },
	{ "key raw (PF_KEY_V2)", AF_KEY, SOCK_RAW, 2, false },
	{ "bluetooth raw (HCI)", AF_BLUETOOTH, SOCK_RAW, 1, false },
	{ "xdp raw", AF_XDP, SOCK_RAW, 0, false },
	{ "tipc rdm", AF_TIPC, SOCK_RDM, 0, false },
	{ "rds seqpacket", AF_RDS, SOCK_SEQPACKET, 0, false },
	{ "can raw", AF_CAN, SOCK_RAW, 1, false },
	{ "nfc raw", AF_NFC, SOCK_RAW, 1, false },
	{ "llc dgram", AF_LLC, SOCK_DGRAM, 0, false },
	{ "appletalk dgram", AF_APPLETALK, SOCK_DGRAM, 0, false },
	{ "ax25 seqpacket", AF_AX25, SOCK_SEQPACKET, 0, false },
	{ "x25 seqpacket", AF_X25, SOCK_SEQPACKET, 0, false },
	{ "ipx dgram", AF_IPX, SOCK_DGRAM, 0, false },
	{ "atmpvc dgram", AF_ATMPVC, SOCK_DGRAM, 0, false },
	{ "pppox stream", AF_PPPOX, SOCK_STREAM, 0, false },
	{ "phonet dgram", AF_PHONET, SOCK_DGRAM, 0, false },
	{ "ieee802154 dgram", AF_IEEE802154, SOCK_DGRAM, 0, false },
	{ "caif seqpacket", AF_CAIF, SOCK_SEQPACKET, 0, false },
	{ "rxrpc dgram", AF_RXRPC, SOCK_DGRAM, 2 /* PF_INET */, false },
	{ "kcm dgram", AF_KCM, SOCK_DGRAM, 0, false },
	{ "qipcrtr dgram", AF_QIPCRTR, SOCK_DGRAM, 0, false },
	{ "smc stream", AF_SMC, SOCK_STREAM, 0, false },
	{ "mctp dgram", AF_MCTP, SOCK_DGRAM, 0, false },
	{ "socketpair vsock stream", AF_VSOCK, SOCK_STREAM, 0, true },
	{ "socketpair tipc dgram", AF_TIPC, SOCK_DGRAM, 0, true },
	{ "socketpair netlink generic", AF_NETLINK, SOCK_RAW, 16, true },
	{ "socketpair alg seqpacket", AF_ALG, SOCK_SEQPACKET, 0, true },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof(*(a)))

/* The raw syscalls: the family goes to the kernel as the full register. */
static long family_try(const struct family_case *c, int *err)
{
	long r;
	int sv[2] = { -1, -1 };
	if (c->pair)
		r = syscall(SYS_socketpair, c->family, c->type | SOCK_CLOEXEC,
			    c->protocol, sv);
	else
		r = syscall(SYS_socket, c->family, c->type | SOCK_CLOEXEC,
			    c->protocol);
	*err = r < 0 ? errno : 0;
	if (r >= 0 && !c->pair)
		close((int)r);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return r;
}

/* Proves: socket() and socketpair() create only the address families a
 * sandbox needs; every other family (vsock - not namespaced, the VM host's
 * port space -, packet, every netlink protocol but NETLINK_ROUTE, alg, key,
 * bluetooth, ...) is answered by the filter's EAFNOSUPPORT, also with
 * garbage in the high bits of the family or protocol. A different errno
 * means the call reached the kernel's family code: a hole. */
static int check_families(void)
{
	for (size_t i = 0; i < ARRAY_LEN(families_allowed); i++) {
		const struct family_case *c = &families_allowed[i];
		int e;
		if (family_try(c, &e) < 0)
			error_("%-40s %s: a family the sandbox needs", c->name,
			       errname(e));
		else
			say("%-40s allowed", c->name);
	}
	for (size_t i = 0; i < ARRAY_LEN(families_denied); i++) {
		const struct family_case *c = &families_denied[i];
		int e;
		if (family_try(c, &e) >= 0)
			escape("%-40s created", c->name);
		else if (e != EAFNOSUPPORT)
			escape("%-40s %s: reached the kernel (want EAFNOSUPPORT "
			       "from the filter)",
			       c->name, errname(e));
		else
			say("%-40s EAFNOSUPPORT", c->name);
	}
	/* what NETLINK_ROUTE is kept for */
	struct ifaddrs *ifa;
	if (getifaddrs(&ifa) < 0) {
		error_("getifaddrs: %s", errname(errno));
	} else {
		say("getifaddrs works");
		freeifaddrs(ifa);
	}
	return finish();
}

static int tcp_connect_timeout(const char *addr, int port, int ms, int *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		close(fd);
		*err = EINVAL;
		return -1;
	}
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno == EINPROGRESS) {
		struct pollfd pfd = { fd, POLLOUT, 0 };
		if (poll(&pfd, 1, ms) == 1) {
			int so = 0;
			socklen_t l = sizeof(so);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &l);
			r = so ? -1 : 0;
			errno = so;
		} else {
			r = -1;
			errno = ETIMEDOUT;
		}
	}
	*err = r < 0 ? errno : 0;
	close(fd);
	return r;
}

/* Proves: a TCP service of the host (ADDR PORT) is unreachable. */
static int check_connect(int argc, char **argv)
{
	if (argc < 2) {
		error_("usage: connect ADDR PORT");
		return finish();
	}
	int e;
	if (tcp_connect_timeout(argv[0], atoi(argv[1]), 2000, &e) == 0)
		escape("connected to %s:%s", argv[0], argv[1]);
	else
		say("connect %s:%s: %s", argv[0], argv[1], errname(e));
	return finish();
}

/* host: listen on ADDR:PORT for SECONDS, accepting and closing. */
static int helper_tcp_listen(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(argv[1])) };
	inet_pton(AF_INET, argv[0], &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0) {
		perror("tcp-listen");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	time_t end = time(NULL) + atoi(argv[2]);
	while (time(NULL) < end) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		if (poll(&pfd, 1, 200) == 1) {
			int c = accept(fd, NULL, NULL);
			if (c >= 0)
				close(c);
		}
	}
	return 0;
}

static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	size_t len = strlen(name);
	if (len > sizeof(sa->sun_path) - 2)
		len = sizeof(sa->sun_path) - 2;
	memcpy(sa->sun_path + 1, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

/* Proves: abstract unix sockets of the host (no path, scoped by network
 * namespace: X11, D-Bus, container runtimes use them) are unreachable. */
static int check_abstract(int argc, char **argv)
{
	if (argc < 1) {
		error_("usage: abstract NAME");
		return finish();
	}
	struct sockaddr_un sa;
	socklen_t len = abstract_addr(argv[0], &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		error_("socket: %s", errname(errno));
		return finish();
	}
	if (connect(fd, (struct sockaddr *)&sa, len) == 0)
		escape("connected to abstract socket @%s", argv[0]);
	else
		say("connect @%s: %s", argv[0], errname(errno));
	close(fd);
	return finish();
}

/* host: listen on abstract socket NAME for SECONDS. */
static int helper_listen_abstract(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct sockaddr_un sa;
	socklen_t len = abstract_addr(argv[0], &sa);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 ||
	    listen(fd, 16) < 0) {
		perror("listen-abstract");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	time_t end = time(NULL) + atoi(argv[1]);
	while (time(NULL) < end) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		if (poll(&pfd, 1, 200) == 1) {
			int c = accept(fd, NULL, NULL);
			if (c >= 0)
				close(c);
		}
	}
	return 0;
}

/* Proves: SysV IPC objects of the host (shared memory, message queues,
 * semaphores under KEY) are invisible: a separate IPC namespace. */
static int check_ipc(int argc, char **argv)
{
	if (argc < 1) {
		error_("usage: ipc KEY");
		return finish();
	}
	key_t key = (key_t)strtol(argv[0], NULL, 0);
	if (shmget(key, 0, 0) >= 0)
		escape("shared memory segment key %s visible", argv[0]);
	else
		say("shmget %s: %s", argv[0], errname(errno));
	if (msgget(key, 0) >= 0)
		escape("message queue key %s visible", argv[0]);
	else
		say("msgget %s: %s", argv[0], errname(errno));
	if (semget(key, 0, 0) >= 0)
		escape("semaphore set key %s visible", argv[0]);
	else
		say("semget %s: %s", argv[0], errname(errno));
	return finish();
}

/* host: create (or remove) the SysV objects for KEY. */
static int helper_ipc(bool create, int argc, char **argv)
{
	if (argc < 1)
		return 2;
	key_t key = (key_t)strtol(argv[0], NULL, 0);
	if (create) {
		int ok = shmget(key, 4096, IPC_CREAT | 0666) >= 0 &&
			 msgget(key, IPC_CREAT | 0666) >= 0 &&
			 semget(key, 1, IPC_CREAT | 0666) >= 0;
		return ok ? 0 : 2;
	}
	int id;
	if ((id = shmget(key, 0, 0)) >= 0)
		shmctl(id, IPC_RMID, NULL);
	if ((id = msgget(key, 0)) >= 0)
		msgctl(id, IPC_RMID, NULL);
	if ((id = semget(key, 0, 0)) >= 0)
		semctl(id, 0, IPC_RMID);
	return 0;
}

/* ------------------------------------------------------------------- fds */

/* Proves: nothing of the caller's (or of Warren's set-up: layer mounts,
 * sockets, the init binary) is open in the sandbox beyond stdin, stdout
 * and stderr. */
static int check_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		error_("/proc/self/fd: %s", errname(errno));
		return finish();
	}
	int self = dirfd(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		int fd = atoi(de->d_name);
		if (fd == self)
			continue;
		char path[64], target[PATH_MAX];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if (fd > 2)
			escape("fd %d open: %s", fd, target);
		else
			say("fd %d: %s", fd, target);
	}
	closedir(d);
	return finish();
}

/* ---------------------------------------------------------------- mounts */

static bool has_path(const char *s, const char *prefix)
{
	size_t len = strlen(prefix);
	for (const char *p = s; (p = strstr(p, prefix)); p++) {
		/* a path component boundary on both sides */
		bool start = p == s || p[-1] == ' ' || p[-1] == '=' ||
			     p[-1] == ':' || p[-1] == ',';
		char after = p[len];
		bool end = prefix[len - 1] == '/' || after == '\0' ||
			   after == '/' || after == ' ' || after == ',' ||
			   after == ':';
		if (start && end)
			return true;
	}
	return false;
}

/* Proves: /proc/self/mountinfo reveals no host path - the root of each
 * mount, its source, its options - that would tell the sandbox where its
 * layers, its upper directory or the runtime state live on the host (or
 * whose home directory it came from). Host /usr and the /dev nodes are
 * shown by design. The probe's own --bind is skipped; extra forbidden
 * strings may be given as arguments. Overlay's lowerdir/upperdir options
 * name the private staging directory under the runtime dir (only there,
 * never a layer's real path): reported, allowed. */
static int check_mounts(int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	const char *forbidden[64] = { "/work", "/home", "/root", "/tmp/",
				      "/var/lib", "/srv", "/mnt/",
				      "/run/warren", "/dev/shm/warren" };
	int nf = 9;
	for (int i = 0; i < argc && nf < 64; i++)
		forbidden[nf++] = argv[i];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		error_("mountinfo: %s", errname(errno));
		return finish();
	}
	char line[8192];
	int mounts = 0;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char root[4096], mnt[4096], fstype[64], source[4096],
			super[4096] = "";
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
		    sscanf(sep + 3, "%63s %4095s %4095s", fstype, source, super) < 2) {
			error_("cannot parse: %s", line);
			continue;
		}
		mounts++;
		if (!strcmp(mnt, self))
			continue; /* the probe itself, bound by the test */
		/* the staging directory is allowed in overlay's options only */
		char opts[4096];
		snprintf(opts, sizeof(opts), "%s", super);
		for (int i = 0; i < nf; i++) {
			const char *what = NULL;
			if (has_path(root, forbidden[i]))
				what = "root";
			else if (has_path(source, forbidden[i]))
				what = "source";
			else if (has_path(opts, forbidden[i])) {
				/* only the staging dir, and only in overlay */
				char tmp[4096];
				snprintf(tmp, sizeof(tmp), "%s", opts);
				char *p;
				while ((p = strstr(tmp, "/warren/stage/"))) {
					/* blank out <rt>/stage/... up to ,:
					 * so what is left can be checked */
					char *start = p;
					while (start > tmp && start[-1] != '=' &&
					       start[-1] != ':' && start[-1] != ',')
						start--;
					char *end = p + strcspn(p, ",:");
					memset(start, '_', (size_t)(end - start));
				}
				if (has_path(tmp, forbidden[i]))
					what = "options";
			}
			if (what)
				escape("mount on %s: %s '%s' reveals %s", mnt,
				       what,
				       !strcmp(what, "root")     ? root
				       : !strcmp(what, "source") ? source
								 : opts,
				       forbidden[i]);
		}
		if (strstr(opts, "/warren/stage/"))
			say("note: %s (%s) options name the staging dir: %.160s",
			    mnt, fstype, opts);
	}
	fclose(f);
	say("%d mounts checked", mounts);
	if (mounts == 0)
		error_("no mounts parsed");
	return finish();
}

/* ----------------------------------------------------------------- ptrace */

/* Proves: PID 1 (warren-init, holding the exec socket and the sandbox's
 * lifetime) is out of reach: it is non-dumpable and CAP_SYS_PTRACE is
 * gone, so no attach, no memory access, no /proc/1 fds, root, environ,
 * no fd stealing with pidfd_getfd - and SIGKILL from inside is ignored. */
static int check_ptrace1(void)
{
	errno = 0;
	if (ptrace(PTRACE_ATTACH, 1, NULL, NULL) == 0) {
		escape("PTRACE_ATTACH to pid 1 succeeded");
		ptrace(PTRACE_DETACH, 1, NULL, NULL);
	} else {
		say("PTRACE_ATTACH 1: %s", errname(errno));
	}
	errno = 0;
	if (ptrace(PTRACE_SEIZE, 1, NULL, NULL) == 0) {
		escape("PTRACE_SEIZE of pid 1 succeeded");
		ptrace(PTRACE_DETACH, 1, NULL, NULL);
	} else {
		say("PTRACE_SEIZE 1: %s", errname(errno));
	}
	/* gVisor's /proc gives root inside init's environ (empty), auxv,
	 * maps and descriptors (the sandbox's own exec connections) whatever
	 * init's dumpable flag, and lets SIGKILL from inside end it (and
	 * with it the sandbox): a known difference (docs/security.md); the
	 * rest must hold there too */
	bool gv = in_gvisor();
	const char *files[] = { "/proc/1/mem", "/proc/1/environ",
				"/proc/1/auxv", "/proc/1/maps" };
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);
		char buf[16];
		if (fd >= 0 && read(fd, buf, sizeof(buf)) > 0 && gv && i > 0)
			say("gVisor: %s readable (known difference)", files[i]);
		else if (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
			escape("read %s", files[i]);
		else
			say("%s: %s", files[i], errname(errno));
		if (fd >= 0)
			close(fd);
	}
	/* CVE-2019-5736 style: init's binary is a host file */
	for (int mode = 0; mode < 2; mode++) {
		int fd = open("/proc/1/exe",
			      (mode ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
		if (fd >= 0) {
			escape("opened /proc/1/exe (the host's warren-init) %s",
			       mode ? "for writing" : "for reading");
			close(fd);
		} else {
			say("open /proc/1/exe %s: %s", mode ? "O_WRONLY" : "O_RDONLY",
			    errname(errno));
		}
	}
	const char *links[] = { "/proc/1/root", "/proc/1/cwd", "/proc/1/exe" };
	for (size_t i = 0; i < sizeof(links) / sizeof(*links); i++) {
		char t[PATH_MAX];
		if (readlink(links[i], t, sizeof(t)) >= 0 && gv)
			say("gVisor: readlink %s -> %s", links[i], t);
		else if (readlink(links[i], t, sizeof(t)) >= 0)
			escape("readlink %s allowed", links[i]);
		else
			say("%s: %s", links[i], errname(errno));
	}
	/* the fd numbers may be listed; what they point to must stay closed */
	DIR *d = opendir("/proc/1/fd");
	int listed = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		listed++;
		char path[300], t[PATH_MAX];
		snprintf(path, sizeof(path), "/proc/1/fd/%s", de->d_name);
		if (gv)
			continue; /* known difference, above */
		if (readlink(path, t, sizeof(t)) >= 0)
			escape("readlink %s allowed", path);
		int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			escape("opened %s: init's descriptor", path);
			close(fd);
		}
	}
	if (d)
		closedir(d);
	say("/proc/1/fd: %d entries, none readable or openable", listed);
	char buf[64];
	struct iovec local = { buf, sizeof(buf) };
	struct iovec remote = { (void *)0x400000, sizeof(buf) };
	errno = 0;
	if (process_vm_readv(1, &local, 1, &remote, 1, 0) >= 0)
		escape("process_vm_readv of pid 1 succeeded");
	else
		say("process_vm_readv 1: %s", errname(errno));
	int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
	if (pidfd < 0) {
		say("pidfd_open 1: %s", errname(errno));
	} else {
		for (int fd = 0; fd < 16; fd++) {
			int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
			if (got >= 0) {
				escape("pidfd_getfd took fd %d of pid 1", fd);
				close(got);
			} else if (errno != EBADF && errno != EPERM) {
				say("pidfd_getfd 1/%d: %s", fd, errname(errno));
			}
		}
		say("pidfd_getfd on pid 1's fds 0-15: refused");
		close(pidfd);
	}
	if (gv) {
		say("gVisor: SIGKILL to pid 1 would end this sandbox (not sent)");
		return finish();
	}
	/* a pid namespace's init ignores SIGKILL and SIGSTOP from inside */
	kill(1, SIGSTOP);
	kill(1, SIGKILL);
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	char st[512] = "";
	if (kill(1, 0) < 0) {
		escape("pid 1 gone after SIGKILL from inside");
	} else {
		say("pid 1 survives SIGKILL from inside");
		char *p = NULL;
		if (read_small("/proc/1/stat", st, sizeof(st)) > 0)
			p = strrchr(st, ')');
		if (p && (p[2] == 'T' || p[2] == 't')) {
			escape("pid 1 stopped by SIGSTOP from inside");
			kill(1, SIGCONT);
		} else {
			say("pid 1 not stopped by SIGSTOP (state %c)",
			    p ? p[2] : '?');
		}
	}
	return finish();
}

/* ---------------------------------------------------------------- setuid */

static int copy_self(const char *dst)
{
	unlink(dst);
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (in < 0 || out < 0) {
		int e = errno;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		errno = e;
		return -1;
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	}
	int e = errno;
	close(in);
	close(out);
	errno = e;
	return n < 0 ? -1 : 0;
}

/* Runs PATH CHILDARG as uid/gid 1000 (no supplementary groups) and returns
 * the child's exit status; the child reports its credentials. */
static int run_as_user(const char *path, const char *arg)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(1000, 1000, 1000) < 0 ||
		    setresuid(1000, 1000, 1000) < 0) {
			printf("  ERROR: drop to uid 1000: %s\n", strerror(errno));
			_exit(3);
		}
		execl(path, path, arg, (char *)NULL);
		printf("  ERROR: exec %s: %s\n", path, strerror(errno));
		_exit(3);
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* internal: exec'd by check_setuid/check_fcaps as uid 1000. Exit 42 if it
 * gained root or any capability, 43 if not. */
static int helper_cred_child(void)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;
	getresuid(&r, &e, &s);
	getresgid(&rg, &eg, &sg);
	char caps[64] = "?";
	status_field("/proc/self/status", "CapEff", caps, sizeof(caps));
	uint64_t eff = strtoull(caps, NULL, 16);
	printf("  child: ruid %u euid %u suid %u rgid %u egid %u sgid %u "
	       "CapEff %s\n",
	       (unsigned)r, (unsigned)e, (unsigned)s, (unsigned)rg,
	       (unsigned)eg, (unsigned)sg, caps);
	fflush(stdout);
	return (e == 0 || s == 0 || eff != 0) ? 42 : 43;
}

/* Proves: setuid-root binaries give nothing (no_new_privs): a copy of this
 * probe, owned by root and mode 4755 in a writable place (no nosuid there),
 * run as uid 1000, keeps euid 1000. Without no_new_privs it would be root
 * again (the probe shows that on the host). DIR defaults to /tmp. */
static int check_setuid(int argc, char **argv)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.probe-suid", argc > 0 ? argv[0] : "/tmp");
	if (copy_self(path) < 0 || chown(path, 0, 0) < 0 || chmod(path, 04755) < 0) {
		error_("prepare %s: %s", path, strerror(errno));
		unlink(path);
		return finish();
	}
	struct stat st;
	if (stat(path, &st) < 0 || !(st.st_mode & S_ISUID) || st.st_uid != 0) {
		error_("%s did not keep mode 4755 root", path);
		unlink(path);
		return finish();
	}
	say("%s: mode %o owner %d", path, st.st_mode & 07777, (int)st.st_uid);
	int code = run_as_user(path, "cred-child");
	unlink(path);
	if (code == 42)
		escape("setuid-root binary raised uid 1000 back to root");
	else if (code == 43)
		say("setuid bit ignored (no_new_privs)");
	else
		error_("child exited %d", code);
	/* the host's setuid binaries: bound nosuid, and no_new_privs anyway */
	const char *suid_bins[] = { "/usr/bin/su", "/usr/bin/passwd",
				    "/usr/bin/newgrp", "/usr/bin/mount" };
	for (size_t i = 0; i < sizeof(suid_bins) / sizeof(*suid_bins); i++) {
		if (stat(suid_bins[i], &st) == 0 && (st.st_mode & S_ISUID))
			say("%s is setuid root (host /usr, mounted nosuid)",
			    suid_bins[i]);
	}
	return finish();
}

/* Proves: file capabilities give nothing either: a copy carrying a
 * security.capability xattr that grants cap_dac_override and cap_kill
 * (both in the bounding set, so only no_new_privs stands in the way), run
 * as uid 1000, has no capability. */
static int check_fcaps(int argc, char **argv)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.probe-fcap", argc > 0 ? argv[0] : "/tmp");
	if (copy_self(path) < 0 || chmod(path, 0755) < 0) {
		error_("prepare %s: %s", path, strerror(errno));
		unlink(path);
		return finish();
	}
	/* struct vfs_cap_data, revision 2, effective bit set */
	struct {
		uint32_t magic_etc;
		struct {
			uint32_t permitted, inheritable;
		} data[2];
	} cap = { 0x02000000 | 0x000001,
		  { { (1u << CAP_DAC_OVERRIDE) | (1u << CAP_KILL), 0 }, { 0, 0 } } };
	if (setxattr(path, "security.capability", &cap, sizeof(cap), 0) < 0) {
		if (errno == EOPNOTSUPP && in_gvisor())
			/* the Sentry keeps no file capabilities at all */
			say("setxattr security.capability: EOPNOTSUPP");
		else
			error_("setxattr security.capability: %s",
			       errname(errno));
		unlink(path);
		return finish();
	}
	char back[64];
	if (getxattr(path, "security.capability", back, sizeof(back)) <= 0) {
		error_("xattr not kept: %s", errname(errno));
		unlink(path);
		return finish();
	}
	say("%s carries file capabilities dac_override,kill", path);
	int code = run_as_user(path, "cred-child");
	unlink(path);
	if (code == 42)
		escape("file capabilities granted to uid 1000");
	else if (code == 43)
		say("file capabilities ignored (no_new_privs)");
	else
		error_("child exited %d", code);
	return finish();
}

/* ------------------------------------------------------------- ovl-forge */

/* helper: tries to forge overlayfs metadata on each PATH (an opaque marker
 * and a redirect). With `userxattr` overlay keeps its metadata in
 * user.overlay.* xattrs of the upper layer, and an --upper directory later
 * becomes a lower layer of other sandboxes: if a forged xattr landed there
 * as-is, they would obey it (hide a lower directory, redirect a lookup). The
 * kernel either refuses, or (6.7+) stores it escaped as
 * user.overlay.overlay.*, which a later overlay does not obey; the shell test
 * checks the effect from a second sandbox. Prints what was set; exit 0. */
static int helper_ovl_forge(int argc, char **argv)
{
	const struct {
		const char *name, *value;
	} xs[] = {
		{ "user.overlay.opaque", "y" },
		{ "user.overlay.redirect", "/nonexistent" },
		{ "trusted.overlay.opaque", "y" },
	};
	for (int i = 0; i < argc; i++) {
		for (size_t x = 0; x < sizeof(xs) / sizeof(*xs); x++) {
			if (setxattr(argv[i], xs[x].name, xs[x].value,
				     strlen(xs[x].value), 0) == 0)
				say("set %s on %s", xs[x].name, argv[i]);
			else
				say("%s on %s: %s", xs[x].name, argv[i],
				    errname(errno));
		}
	}
	printf("RESULT ovl-forge DONE\n");
	return 0;
}

/* ---------------------------------------------------------------- chroot */

static long chroot_escape(void)
{
	/* the classic: chroot into a subdirectory while keeping the cwd
	 * outside it, walk up, chroot there. With CAP_SYS_CHROOT kept this
	 * works - it must end at the sandbox's root, because the host's root
	 * is no longer in the mount namespace at all (pivot_root + detach). */
	struct stat before, after;
	if (stat("/", &before) < 0)
		return -1;
	mkdir("/tmp/.probe-chroot", 0700);
	if (chdir("/") < 0 || chroot("/tmp/.probe-chroot") < 0)
		return -1;
	for (int i = 0; i < 64; i++) {
		if (chdir("..") < 0)
			return -1;
	}
	if (chroot(".") < 0)
		return -1;
	if (stat("/", &after) < 0)
		return -1;
	rmdir("/tmp/.probe-chroot");
	/* 0: still the sandbox root; 1: somewhere else */
	if (after.st_dev == before.st_dev && after.st_ino == before.st_ino)
		return 0;
	/* gVisor: above the container's root is the Sentry's own empty
	 * root; anything in it is an escape all the same */
	if (in_gvisor()) {
		DIR *d = opendir("/");
		struct dirent *de;
		int entries = 0;
		while (d && (de = readdir(d)))
			entries += strcmp(de->d_name, ".") &&
				   strcmp(de->d_name, "..");
		if (d)
			closedir(d);
		return d && entries == 0 ? 1 : 2;
	}
	return 1;
}

static long dotdot_walk(void)
{
	/* walking .. from / and from an fd of / never leaves / */
	struct stat root, here;
	if (stat("/", &root) < 0)
		return -1;
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fchdir(fd) < 0)
		return -1;
	for (int i = 0; i < 64; i++) {
		if (chdir("..") < 0)
			return -1;
	}
	if (stat(".", &here) < 0)
		return -1;
	return here.st_dev == root.st_dev && here.st_ino == root.st_ino ? 0 : 1;
}

/* Proves: no directory above the sandbox's root can be reached, neither by
 * walking .. nor by the chroot trick (CAP_SYS_CHROOT is kept). */
static int check_chroot(void)
{
	int sig = 0;
	long r = in_child(chroot_escape, &sig);
	if (sig)
		error_("chroot child killed by signal %d", sig);
	else if (r < 0)
		error_("chroot escape attempt failed to run: %s", errname(errno));
	else if (r == 2)
		escape("chroot trick reached a directory above the sandbox root "
		       "that holds files");
	else if (r == 1 && !in_gvisor())
		escape("chroot trick reached a directory above the sandbox root");
	else if (r == 1)
		/* chroot_escape checked it holds nothing */
		say("chroot trick ends in the Sentry's empty root");
	else
		say("chroot trick ends at the sandbox root");
	r = in_child(dotdot_walk, &sig);
	if (r < 0)
		error_(".. walk failed: %s", errname(errno));
	else if (r == 1)
		escape(".. from / leads elsewhere");
	else
		say(".. from / stays at /");
	return finish();
}

/* ---------------------------------------------------------------- procfs */

/* Proves: the kernel's global knobs in /proc and /sys are out of reach -
 * core_pattern and modprobe (the classic container escapes: the kernel
 * runs the named program as host root), sysrq, drop_caches, kcore, kmsg,
 * uevent_helper, binfmt_misc. Files are opened for writing and never
 * written. */
static int check_procfs(void)
{
	const char *wr[] = {
		"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe",
		"/proc/sys/kernel/sysrq",        "/proc/sysrq-trigger",
		"/proc/sys/vm/drop_caches",      "/proc/sys/kernel/panic",
		"/proc/sys/fs/binfmt_misc/register",
		"/sys/kernel/uevent_helper",     "/sys/fs/cgroup/cgroup.procs",
		"/proc/sys/kernel/hostname",
	};
	for (size_t i = 0; i < sizeof(wr) / sizeof(*wr); i++) {
		int fd = open(wr[i], O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			/* the UTS namespace's own hostname is harmless */
			if (!strcmp(wr[i], "/proc/sys/kernel/hostname"))
				say("%s writable (own UTS namespace)", wr[i]);
			else if (!strcmp(wr[i], "/proc/sysrq-trigger") &&
				 in_gvisor())
				/* the Sentry's own, which does nothing */
				say("%s: the Sentry's (no host effect)", wr[i]);
			else
				escape("%s open for writing", wr[i]);
			close(fd);
		} else {
			say("%s: %s", wr[i], errname(errno));
		}
	}
	const char *rd[] = { "/proc/kcore", "/proc/kmsg", "/dev/mem",
			     "/dev/kmsg", "/proc/kallsyms" };
	for (size_t i = 0; i < sizeof(rd) / sizeof(*rd); i++) {
		int fd = open(rd[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			say("%s: %s", rd[i], errname(errno));
			continue;
		}
		if (!strcmp(rd[i], "/proc/kallsyms")) {
			/* readable by everyone, but addresses must be 0 */
			char buf[64] = "";
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = '\0';
			if (n > 0 && strncmp(buf, "0000000000000000", 16))
				escape("/proc/kallsyms shows kernel addresses");
			else
				say("/proc/kallsyms: addresses hidden");
		} else {
			escape("%s opened for reading", rd[i]);
		}
		close(fd);
	}
	return finish();
}

/* --------------------------------------------------------------- badarch */

static long i386_getpid(void)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	return ret;
#else
	errno = ENOSYS;
	return -1;
#endif
}

static long x32_getpid(void)
{
#if defined(__x86_64__)
	return syscall(0x40000000L | SYS_getpid);
#else
	errno = ENOSYS;
	return -1;
#endif
}

static long i386_mount(void)
{
#if defined(__x86_64__)
	/* i386 mount is 21: not on the x86_64 deny list's numbers */
	long ret;
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(21L), "b"(0L), "c"(0L), "d"(0L), "S"(0L), "D"(0L)
			 : "memory");
	return ret;
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* Proves: system calls through a foreign ABI (i386 int 0x80, x32), whose
 * numbers differ from the x86_64 ones the rules name, kill the process
 * instead of bypassing every rule. */
static int check_badarch(void)
{
#if !defined(__x86_64__)
	say("not x86_64: nothing to check");
	return finish();
#else
	struct {
		const char *what;
		long (*fn)(void);
	} cases[] = {
		{ "i386 getpid (int 0x80)", i386_getpid },
		{ "i386 mount (int 0x80)", i386_mount },
		{ "x32 getpid", x32_getpid },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int sig = 0;
		errno = 0;
		long r = in_child(cases[i].fn, &sig);
		if (sig == SIGSYS)
			say("%s: killed by SIGSYS", cases[i].what);
		else if (sig)
			say("%s: killed by signal %d (ABI not available)",
			    cases[i].what, sig);
		else
			escape("%s: returned %ld (errno %s): not killed",
			       cases[i].what, r, errname(errno));
	}
	return finish();
#endif
}

/* ------------------------------------------------------------- forkbomb */

/* Proves: the pid limit holds: forking stops with EAGAIN at LIMIT tasks
 * (including those already running), and never more are seen in /proc. */
static int check_forkbomb(int argc, char **argv)
{
	int limit = argc > 0 ? atoi(argv[0]) : 64;
	int attempts = limit * 4 + 64;
	pid_t *kids = calloc((size_t)attempts, sizeof(pid_t));
	int n = 0, err = 0;
	fflush(stdout);
	for (int i = 0; i < attempts; i++) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			err = errno;
			break;
		}
		kids[n++] = p;
	}
	int seen = count_pids();
	say("forked %d, then %s; %d processes in /proc (limit %d)", n,
	    err ? errname(err) : "no failure", seen, limit);
	if (!err)
		escape("%d forks and no refusal", n);
	else if (err != EAGAIN)
		error_("fork failed with %s, want EAGAIN", errname(err));
	if (seen > limit)
		escape("%d processes alive, above the limit %d", seen, limit);
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (int i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	return finish();
}

/* ------------------------------------------------------------------- cpu */

/* Proves: the CPU limit holds: spinning for SECONDS of wall time gets at
 * most MAX (a fraction, e.g. 0.4) of one CPU. */
static int check_cpu(int argc, char **argv)
{
	double secs = argc > 0 ? atof(argv[0]) : 2.0;
	double max = argc > 1 ? atof(argv[1]) : 0.5;
	struct timespec w0, w1, c1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	volatile unsigned long spin = 0;
	double wall = 0, cpu = 0;
	do {
		for (int i = 0; i < 100000; i++)
			spin++;
		clock_gettime(CLOCK_MONOTONIC, &w1);
		wall = (double)(w1.tv_sec - w0.tv_sec) +
		       (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
	} while (wall < secs);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	cpu = (double)c1.tv_sec + (double)c1.tv_nsec / 1e9;
	say("cpu %.2fs over %.2fs wall: %.2f of a CPU (max %.2f)", cpu, wall,
	    cpu / wall, max);
	if (cpu / wall > max)
		escape("used %.2f of a CPU, above %.2f", cpu / wall, max);
	return finish();
}

/* ----------------------------------------------------------------- alloc */

/* Allocates and touches MB megabytes, reporting progress; under a memory
 * limit it is expected to be killed (the shell test checks how). */
static int check_alloc(int argc, char **argv)
{
	long mb = argc > 0 ? atol(argv[0]) : 256;
	for (long i = 0; i < mb; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			say("mmap failed after %ld MB: %s", i, errname(errno));
			return finish();
		}
		memset(p, 0x5a, 1 << 20);
		if (i % 32 == 0) {
			printf("  allocated %ld MB\n", i);
			fflush(stdout);
		}
	}
	escape("allocated and touched %ld MB", mb);
	return finish();
}

/* ------------------------------------------------------------------- env */

/* Proves: none of the named variables (set in the caller's environment)
 * reached the sandboxed command. */
static int check_env(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *v = getenv(argv[i]);
		if (v)
			escape("%s=%s leaked from the caller", argv[i], v);
		else
			say("%s not set", argv[i]);
	}
	extern char **environ;
	for (char **e = environ; *e; e++)
		say("env %s", *e);
	return finish();
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
	fprintf(stderr,
		"usage: probe CHECK [ARGS]\n"
		"checks (inside a sandbox; exit 0 held, 1 escape, 2 error):\n"
		"  caps seccomp syscalls [--userns-allowed] module mknod\n"
		"  opendev PATH... tiocsti tiocsti-fd0 ns [NAME:INODE...] [max=N]\n"
		"  idmap net [ADDR...] families connect ADDR PORT abstract NAME\n"
		"  ipc KEY\n"
		"  fds mounts [FORBIDDEN...] ptrace1 setuid [DIR] fcaps [DIR]\n"
		"  chroot procfs badarch forkbomb LIMIT cpu SECS MAX alloc MB\n"
		"  env NAME...\n"
		"host helpers:\n"
		"  listen-abstract NAME SECS  tcp-listen ADDR PORT SECS\n"
		"  ipc-create KEY  ipc-remove KEY\n"
		"inside, helpers: ovl-forge PATH...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		usage();
	check_name = argv[1];
	int ac = argc - 2;
	char **av = argv + 2;
	const char *c = argv[1];
	printf("probe %s (pid %d, uid %d)\n", c, (int)getpid(), (int)getuid());
	if (!strcmp(c, "caps"))
		return check_caps();
	if (!strcmp(c, "seccomp"))
		return check_seccomp();
	if (!strcmp(c, "syscalls"))
		return check_syscalls(ac, av);
	if (!strcmp(c, "module"))
		return check_module();
	if (!strcmp(c, "mknod"))
		return check_mknod();
	if (!strcmp(c, "opendev"))
		return check_opendev(ac, av);
	if (!strcmp(c, "tiocsti"))
		return check_tiocsti();
	if (!strcmp(c, "tiocsti-fd0"))
		return check_tiocsti_fd0();
	if (!strcmp(c, "ns"))
		return check_ns(ac, av);
	if (!strcmp(c, "idmap"))
		return check_idmap();
	if (!strcmp(c, "net"))
		return check_net(ac, av);
	if (!strcmp(c, "families"))
		return check_families();
	if (!strcmp(c, "connect"))
		return check_connect(ac, av);
	if (!strcmp(c, "abstract"))
		return check_abstract(ac, av);
	if (!strcmp(c, "ipc"))
		return check_ipc(ac, av);
	if (!strcmp(c, "fds"))
		return check_fds();
	if (!strcmp(c, "mounts"))
		return check_mounts(ac, av);
	if (!strcmp(c, "ptrace1"))
		return check_ptrace1();
	if (!strcmp(c, "setuid"))
		return check_setuid(ac, av);
	if (!strcmp(c, "fcaps"))
		return check_fcaps(ac, av);
	if (!strcmp(c, "cred-child"))
		return helper_cred_child();
	if (!strcmp(c, "chroot"))
		return check_chroot();
	if (!strcmp(c, "ovl-forge"))
		return helper_ovl_forge(ac, av);
	if (!strcmp(c, "procfs"))
		return check_procfs();
	if (!strcmp(c, "badarch"))
		return check_badarch();
	if (!strcmp(c, "forkbomb"))
		return check_forkbomb(ac, av);
	if (!strcmp(c, "cpu"))
		return check_cpu(ac, av);
	if (!strcmp(c, "alloc"))
		return check_alloc(ac, av);
	if (!strcmp(c, "env"))
		return check_env(ac, av);
	if (!strcmp(c, "listen-abstract"))
		return helper_listen_abstract(ac, av);
	if (!strcmp(c, "tcp-listen"))
		return helper_tcp_listen(ac, av);
	if (!strcmp(c, "ipc-create"))
		return helper_ipc(true, ac, av);
	if (!strcmp(c, "ipc-remove"))
		return helper_ipc(false, ac, av);
	usage();
	return 2;
}
