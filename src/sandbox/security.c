/* security.c - what the sandbox's root may still do: capabilities,
 * no_new_privs and the seccomp filter (docs/security.md explains each rule).
 *
 * Order matters and is the one every careful runtime uses: capabilities are
 * dropped (bounding set first, so no exec can regain them), then
 * no_new_privs, then seccomp last - the filter also forbids the calls the
 * earlier steps need, and installing it without CAP_SYS_ADMIN requires
 * no_new_privs. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Capabilities root keeps inside its own user namespace: enough to own files,
 * switch users and bind low ports (what package managers and test suites
 * need); not enough to mount, trace, configure the network or load code into
 * the kernel. They only ever apply to objects the user namespace owns. */
const int sandbox_kept_caps[] = {
    CAP_CHOWN,	 CAP_DAC_OVERRIDE,     CAP_FOWNER,     CAP_FSETID,
    CAP_KILL,	 CAP_SETGID,	       CAP_SETUID,     CAP_SETPCAP,
    CAP_SETFCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
};
const size_t sandbox_n_kept_caps = ARRAY_SIZE(sandbox_kept_caps);

static bool cap_kept(int cap)
{
	for (size_t i = 0; i < sandbox_n_kept_caps; i++) {
		if (sandbox_kept_caps[i] == cap)
			return true;
	}
	return false;
}

static int last_cap(void)
{
	int last = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &last) != 1)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	return last;
}

static int drop_capabilities(struct child_report *report)
{
	int last = last_cap();
	for (int cap = 0; cap <= last; cap++) {
		if (cap_kept(cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL) {
			snprintf(report->step, sizeof(report->step),
				 "drop capability %d from the bounding set",
				 cap);
			return -(report->err = errno);
		}
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < sandbox_n_kept_caps; i++) {
		int cap = sandbox_kept_caps[i];
		data[cap / 32].effective |= 1u << (cap % 32);
		data[cap / 32].permitted |= 1u << (cap % 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0) {
		snprintf(report->step, sizeof(report->step), "capset");
		return -(report->err = errno);
	}
	return 0;
}

/* The filter, as data: the compiled program is cached under a key hashed
 * from this table (and the attributes below), so any change to a rule
 * changes the key. Default action: allow. */
struct seccomp_rule {
	const char *syscall;
	int errnum;    /* returned instead of running the call */
	int arg;       /* -1: unconditional; else the argument compared */
	uint64_t mask; /* the rule matches when (arg & mask) == value */
	uint64_t value;
	bool unless_userns; /* dropped with --allow-userns */
};

#define DENY(name)                           \
	{                                    \
		name, EPERM, -1, 0, 0, false \
	}

static const struct seccomp_rule seccomp_rules[] = {
    /* loading code into the kernel, replacing it */
    DENY("init_module"),
    DENY("finit_module"),
    DENY("delete_module"),
    DENY("kexec_load"),
    DENY("kexec_file_load"),
    DENY("bpf"),
    /* kernel attack surface with a long CVE history */
    DENY("perf_event_open"),
    DENY("userfaultfd"),
    DENY("keyctl"),
    DENY("add_key"),
    DENY("request_key"),
    DENY("io_uring_setup"),
    DENY("io_uring_enter"),
    DENY("io_uring_register"),
    /* filesystem topology: the sandbox's mounts are final */
    DENY("mount"),
    DENY("umount2"),
    DENY("pivot_root"),
    DENY("move_mount"),
    DENY("open_tree"),
    DENY("fsopen"),
    DENY("fsconfig"),
    DENY("fsmount"),
    DENY("fspick"),
    DENY("mount_setattr"),
    /* file handles bypass path checks (the "shocker" escape) */
    DENY("open_by_handle_at"),
    DENY("name_to_handle_at"),
    /* the machine, not the sandbox */
    DENY("reboot"),
    DENY("swapon"),
    DENY("swapoff"),
    DENY("settimeofday"),
    DENY("clock_settime"),
    DENY("clock_adjtime"),
    DENY("adjtimex"),
    DENY("acct"),
    DENY("quotactl"),
    DENY("quotactl_fd"),
    DENY("syslog"),
    DENY("iopl"),
    DENY("ioperm"),
    DENY("vhangup"),
    DENY("uselib"),
    DENY("nfsservctl"),
    DENY("lookup_dcookie"),
    DENY("fanotify_init"),
    /* joining other namespaces */
    DENY("setns"),
    /* TIOCSTI/TIOCLINUX push input into a terminal we may share with the
     * caller (CVE-2017-5226). ioctl's command is an int: compare the low
     * 32 bits so high garbage bits cannot dodge the rule. */
    {"ioctl", EPERM, 1, 0xffffffffu, TIOCSTI, false},
    {"ioctl", EPERM, 1, 0xffffffffu, TIOCLINUX, false},
    /* unprivileged user namespaces give back every capability (over a
     * nested namespace): a large kernel surface */
    {"clone", EPERM, 0, CLONE_NEWUSER, CLONE_NEWUSER, true},
    {"unshare", EPERM, 0, CLONE_NEWUSER, CLONE_NEWUSER, true},
    /* device nodes: a user namespace cannot make them anyway (no
     * CAP_MKNOD over the host's devices); said here as well for a kernel
     * that would (gVisor's Sentry lets root make them in its tmpfs) */
    {"mknod", EPERM, 1, S_IFMT, S_IFCHR, false},
    {"mknod", EPERM, 1, S_IFMT, S_IFBLK, false},
    {"mknodat", EPERM, 2, S_IFMT, S_IFCHR, false},
    {"mknodat", EPERM, 2, S_IFMT, S_IFBLK, false},
    /* clone3 passes its flags in memory a filter cannot read: ENOSYS
     * makes libc fall back to clone(2), which is checked */
    {"clone3", ENOSYS, -1, 0, 0, true},
};

/* The address families socket() and socketpair() may create, ascending.
 * Every other family is kernel code a coding sandbox never needs, some of
 * it not namespaced at all (vsock shares the host's - or the VM host's -
 * port space), and creating its first socket autoloads its module: the
 * filter answers EAFNOSUPPORT, what a kernel built without the family
 * says. IPv4/IPv6 are for loopback and the egress proxy on 127.0.0.1.
 * Netlink is kept for NETLINK_ROUTE only: getifaddrs needs it (Node's
 * os.networkInterfaces() throws without it, hostname -I and ip fail), and
 * without CAP_NET_ADMIN it can only read the sandbox's own lone loopback. */
struct socket_family {
	int family;
	int protocol; /* -1: any; else the only protocol allowed */
};

static const struct socket_family socket_families[] = {
    {AF_UNIX, -1},
    {AF_INET, -1},
    {AF_INET6, -1},
    {AF_NETLINK, NETLINK_ROUTE},
};

static const char *const socket_calls[] = {"socket", "socketpair"};

/* Refuses every family but socket_families on the call nr. A rule holds one
 * comparison per argument, so the complement is written as blocks: each gap
 * between two allowed families as aligned power-of-two ranges (a masked
 * compare each), everything above the last as one "greater than". The
 * comparisons are on all 64 bits: a family with garbage in the high bits,
 * which the kernel truncates to an int (AF_VSOCK, say), is above the last
 * allowed one, so refused; the same for a netlink protocol. */
static int add_family_rules(scmp_filter_ctx ctx, int nr)
{
	const uint32_t action = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	uint64_t lo = 0;
	int r = 0;
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(socket_families); i++) {
		uint64_t next = (uint64_t)socket_families[i].family;
		while (r == 0 && lo < next) {
			uint64_t size = lo ? lo & -lo : 1ULL << 32;
			while (lo + size > next)
				size >>= 1;
			r = seccomp_rule_add(
			    ctx, action, nr, 1,
			    SCMP_A0(SCMP_CMP_MASKED_EQ, ~(size - 1), lo));
			lo += size;
		}
		lo = next + 1;
		if (r == 0 && socket_families[i].protocol >= 0)
			r = seccomp_rule_add(
			    ctx, action, nr, 2, SCMP_A0(SCMP_CMP_EQ, next),
			    SCMP_A2(SCMP_CMP_NE,
				    (uint64_t)socket_families[i].protocol));
	}
	if (r == 0)
		r = seccomp_rule_add(ctx, action, nr, 1,
				     SCMP_A0(SCMP_CMP_GT, lo - 1));
	return r;
}

/* Attributes, described for the cache key. Foreign-ABI calls (int 0x80,
 * x32) would bypass every rule: a bad architecture kills the process. A
 * binary tree of syscall numbers means fewer instructions per syscall,
 * which is also what the kernel walks for every syscall number when it
 * builds its action cache at load time (half the load cost). */
#define FILTER_ATTRS "default=allow badarch=kill_process nnp=0 optimize=2"

/* The cache key covers seccomp_rules, socket_families, socket_calls and
 * FILTER_ATTRS, not this code:
 * a change here that alters the program must change FILTER_ATTRS too. */
static scmp_filter_ctx build_filter(bool allow_userns)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return NULL;
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
				 SCMP_ACT_KILL_PROCESS);
	if (r == 0) /* no_new_privs is set by us, before */
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (r == 0)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(seccomp_rules); i++) {
		const struct seccomp_rule *rule = &seccomp_rules[i];
		if (rule->unless_userns && allow_userns)
			continue;
		int nr = seccomp_syscall_resolve_name(rule->syscall);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		struct scmp_arg_cmp cmp = {
		    .arg = (unsigned)(rule->arg < 0 ? 0 : rule->arg),
		    .op = SCMP_CMP_MASKED_EQ,
		    .datum_a = rule->mask,
		    .datum_b = rule->value,
		};
		r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(rule->errnum),
					   nr, rule->arg < 0 ? 0 : 1, &cmp);
	}
	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(socket_calls); i++) {
		int nr = seccomp_syscall_resolve_name(socket_calls[i]);
		if (nr != __NR_SCMP_ERROR)
			r = add_family_rules(ctx, nr);
	}
	if (r < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static void fnv(uint64_t *h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		*h ^= p[i];
		*h *= 0x100000001b3ULL;
	}
}

/* FNV-1a over everything the compiled program depends on: the rules, the
 * attributes, the libseccomp version, the architecture. */
static uint64_t filter_key(bool allow_userns)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char buf[256];
	const struct scmp_version *v = seccomp_version();
	snprintf(buf, sizeof(buf), "%s %u.%u.%u %d %u", FILTER_ATTRS,
		 v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0,
		 allow_userns, seccomp_arch_native());
	fnv(&h, buf, strlen(buf));
	for (size_t i = 0; i < ARRAY_SIZE(seccomp_rules); i++) {
		const struct seccomp_rule *rule = &seccomp_rules[i];
		fnv(&h, rule->syscall, strlen(rule->syscall) + 1);
		uint64_t fields[5] = {(uint64_t)rule->errnum,
				      (uint64_t)(int64_t)rule->arg, rule->mask,
				      rule->value, rule->unless_userns};
		fnv(&h, fields, sizeof(fields));
	}
	for (size_t i = 0; i < ARRAY_SIZE(socket_families); i++) {
		int64_t fields[2] = {socket_families[i].family,
				     socket_families[i].protocol};
		fnv(&h, fields, sizeof(fields));
	}
	for (size_t i = 0; i < ARRAY_SIZE(socket_calls); i++)
		fnv(&h, socket_calls[i], strlen(socket_calls[i]) + 1);
	return h;
}

static int read_program(const char *path, struct seccomp_program *out)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = wr_read_file(path, BPF_MAXINSNS * sizeof(struct sock_filter),
			     &data, &len);
	if (r < 0)
		return r;
	if (len == 0 || len % sizeof(struct sock_filter))
		return -EBADMSG;
	out->prog.len = (unsigned short)(len / sizeof(struct sock_filter));
	out->prog.filter = (struct sock_filter *)TAKE_PTR(data);
	return 0;
}

/* libseccomp compiles the filter; the program is cached in the runtime
 * directory (root only) so later sandboxes skip the compile. The child
 * installs it with one prctl. */
int seccomp_prepare(bool allow_userns, struct seccomp_program *out)
{
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *dir = runtime_path("seccomp");
	_cleanup_free_ char *path =
	    runtime_path("seccomp/%016llx.bpf",
			 (unsigned long long)filter_key(allow_userns));
	if (!dir || !path)
		return -ENOMEM;
	if (read_program(path, out) == 0)
		return 0;
	scmp_filter_ctx ctx = build_filter(allow_userns);
	if (!ctx)
		return -EINVAL;
	mkdir(dir, 0700);
	_cleanup_free_ char *tmp = wr_asprintf("%s.%d", path, (int)getpid());
	int r = -ENOMEM;
	if (tmp) {
		int fd =
		    open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
		if (fd >= 0)
			close(fd);
		if (r == 0 && rename(tmp, path) < 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	seccomp_release(ctx);
	if (r < 0)
		return r;
	return read_program(path, out);
}

void seccomp_program_clear(struct seccomp_program *p)
{
	free(p->prog.filter);
	p->prog.filter = NULL;
	p->prog.len = 0;
}

int security_apply(const struct sandbox_config *cfg,
		   const struct seccomp_program *program,
		   struct child_report *report)
{
	int r = drop_capabilities(report);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(report->step, sizeof(report->step),
			 "set no_new_privs");
		return -(report->err = errno);
	}
	if (cfg->no_seccomp)
		return 0;
	/* the program was compiled (or read from the cache) by the parent */
	r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program->prog) < 0
		? -errno
		: 0;
	if (r < 0) {
		snprintf(report->step, sizeof(report->step),
			 "install seccomp filter");
		report->err = -r;
		return r;
	}
	return 0;
}
