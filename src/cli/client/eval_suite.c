/* eval_suite.c - reading an eval suite (eval.h, docs/eval.md): suite.json,
 * each task's task.json, tests/ and solution.patch. Every field is
 * checked here, and each error names the file and the key, before
 * anything is submitted. */
#include "cli/client/eval.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a regular file of at most max bytes (NUL-terminated). */
static int read_file(const char *path, size_t max, char **out, size_t *len,
		     struct wr_error **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return wr_error_input(err, errno, "%s: %s", path,
				      strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return wr_error_input(err, EINVAL, "%s: not a regular file",
				      path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return wr_error_input(err, EFBIG, "%s: larger than %zu bytes",
				      path, max);
	}
	char *buf = wr_malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return wr_error_set(err, ENOMEM, "%s", path);
	}
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

json_t *eval_read_json(const char *dir, const char *name,
		       struct wr_error **err)
{
	_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, name);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (!path) {
		wr_error_set(err, ENOMEM, "%s", name);
		return NULL;
	}
	if (read_file(path, EVAL_FILE_MAX * 16, &text, &len, err) < 0)
		return NULL;
	json_error_t je;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		wr_error_input(err, EINVAL, "%s: line %d: %s", path, je.line,
			       je.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		wr_error_input(err, EINVAL, "%s: not a JSON object", path);
		return NULL;
	}
	return j;
}

/* Only the keys of allowed (NULL-terminated). */
static int keys_known(const char *file, const json_t *obj,
		      const char *const *allowed, struct wr_error **err)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok = ok || !strcmp(key, allowed[i]);
		if (!ok)
			return wr_error_input(err, EINVAL,
					      "%s: unknown key \"%.60s\"", file,
					      key);
	}
	return 0;
}

/* obj[key]: a string of 1..max bytes without NUL (required or not). */
static int string_of(const char *file, const json_t *obj, const char *key,
		     bool required, size_t max, char **out,
		     struct wr_error **err)
{
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!v && !required)
		return 0;
	if (!v)
		return wr_error_input(err, EINVAL, "%s: missing \"%s\"", file,
				      key);
	if (!json_is_string(v) || json_string_length(v) == 0 ||
	    json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return wr_error_input(err, EINVAL,
				      "%s: \"%s\": a string of 1 to %zu bytes",
				      file, key, max);
	*out = wr_strdup(json_string_value(v));
	return *out ? 0 : wr_error_set(err, ENOMEM, "%s", file);
}

/* obj[key]: an array of commands (shell lines); min of them at least. */
static int commands_of(const char *file, const json_t *obj, const char *key,
		       size_t min, json_t **out, struct wr_error **err)
{
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	if (!v && min == 0) {
		*out = json_array();
		return *out ? 0 : wr_error_set(err, ENOMEM, "%s", file);
	}
	if (!v)
		return wr_error_input(err, EINVAL, "%s: missing \"%s\"", file,
				      key);
	if (!json_is_array(v) || json_array_size(v) < min ||
	    json_array_size(v) > EVAL_COMMANDS_MAX)
		return wr_error_input(err, EINVAL,
				      "%s: \"%s\": an array of %zu to %d "
				      "commands",
				      file, key, min, EVAL_COMMANDS_MAX);
	size_t i;
	json_t *c;
	json_array_foreach(v, i, c)
	{
		size_t len = json_is_string(c) ? json_string_length(c) : 0;
		if (len == 0 || len > EVAL_COMMAND_MAX ||
		    strlen(json_string_value(c)) != len)
			return wr_error_input(err, EINVAL,
					      "%s: \"%s\"[%zu]: a shell command "
					      "of 1 to %d bytes",
					      file, key, i, EVAL_COMMAND_MAX);
	}
	*out = json_incref(v);
	return 0;
}

/* A name of a part of a hidden test's path: [A-Za-z0-9._-], not "." or
 * ".." (the server's rule, docs/api.md). */
static bool part_valid(const char *p)
{
	if (!p[0] || !strcmp(p, ".") || !strcmp(p, ".."))
		return false;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' ||
		      *p == '_'))
			return false;
	return true;
}

struct tests_walk {
	json_t *files;
	size_t bytes;
};

/* Every regular file under dir/rel into w->files, as text. */
static int tests_read(const char *root, const char *rel, struct tests_walk *w,
		      int depth, struct wr_error **err)
{
	_cleanup_free_ char *dir =
	    rel[0] ? wr_asprintf("%s/%s", root, rel) : wr_strdup(root);
	if (!dir)
		return wr_error_set(err, ENOMEM, "tests");
	if (depth > 16)
		return wr_error_input(err, EINVAL, "%s: nested too deep", dir);
	DIR *d = opendir(dir);
	if (!d)
		return wr_error_input(err, errno, "%s: %s", dir,
				      strerror(errno));
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		_cleanup_free_ char *sub =
		    rel[0] ? wr_asprintf("%s/%s", rel, e->d_name)
			   : wr_strdup(e->d_name);
		_cleanup_free_ char *path = wr_asprintf("%s/%s", root, sub);
		if (!sub || !path) {
			r = wr_error_set(err, ENOMEM, "tests");
			break;
		}
		struct stat st;
		if (lstat(path, &st) < 0) {
			r = wr_error_input(err, errno, "%s: %s", path,
					   strerror(errno));
		} else if (!part_valid(e->d_name) || strlen(sub) > 256) {
			r = wr_error_input(err, EINVAL,
					   "%s: a hidden test's path has parts "
					   "of [A-Za-z0-9._-] and at most 256 "
					   "bytes",
					   path);
		} else if (S_ISDIR(st.st_mode)) {
			r = tests_read(root, sub, w, depth + 1, err);
		} else if (!S_ISREG(st.st_mode)) {
			r = wr_error_input(err, EINVAL,
					   "%s: not a regular file or a "
					   "directory (a symlink?)",
					   path);
		} else if (json_object_size(w->files) >= EVAL_TESTS_MAX) {
			r = wr_error_input(err, E2BIG,
					   "%s: more than %d hidden test files",
					   root, EVAL_TESTS_MAX);
		} else {
			_cleanup_free_ char *text = NULL;
			size_t len;
			r = read_file(path, EVAL_TESTS_BYTES, &text, &len, err);
			if (r < 0)
				break;
			w->bytes += len;
			json_t *s = json_stringn(text, len);
			if (w->bytes > EVAL_TESTS_BYTES)
				r = wr_error_input(err, E2BIG,
						   "%s: more than %u bytes of "
						   "hidden tests",
						   root, EVAL_TESTS_BYTES);
			else if (!s)
				r = wr_error_input(err, EINVAL,
						   "%s: not text (UTF-8 without "
						   "NUL)",
						   path);
			else
				r = json_object_set_new(w->files, sub, s) < 0
					? wr_error_set(err, ENOMEM, "tests")
					: 0;
			if (r < 0)
				json_decref(s);
			s = NULL;
		}
	}
	closedir(d);
	return r;
}

static void task_clear(struct eval_task *t)
{
	free(t->name);
	free(t->dir);
	free(t->repo);
	free(t->base);
	free(t->prompt);
	json_decref(t->fail_to_pass);
	json_decref(t->pass_to_pass);
	json_decref(t->budget);
	json_decref(t->tests);
	free(t->solution);
	memset(t, 0, sizeof(*t));
}

static int task_load(const char *suite_dir, const char *name,
		     bool need_solution, struct eval_task *t,
		     struct wr_error **err)
{
	static const char *const keys[] = {"repo",	   "base",
					   "prompt",	   "fail_to_pass",
					   "pass_to_pass", "budget",
					   "description",  NULL};
	memset(t, 0, sizeof(*t));
	t->name = wr_strdup(name);
	t->dir = wr_asprintf("%s/%s", suite_dir, name);
	_cleanup_free_ char *file =
	    t->dir ? wr_asprintf("%s/task.json", t->dir) : NULL;
	if (!t->name || !file)
		return wr_error_set(err, ENOMEM, "%s", name);
	json_t *j = eval_read_json(t->dir, "task.json", err);
	if (!j)
		return -EINVAL;
	char *desc = NULL;
	int r = keys_known(file, j, keys, err);
	if (r == 0)
		r = string_of(file, j, "repo", true, 4096, &t->repo, err);
	if (r == 0)
		r = string_of(file, j, "base", true, 256, &t->base, err);
	if (r == 0)
		r = string_of(file, j, "prompt", true, 100 * 1024, &t->prompt,
			      err);
	if (r == 0)
		r = string_of(file, j, "description", false, 4096, &desc, err);
	free(desc);
	if (r == 0)
		r = commands_of(file, j, "fail_to_pass", 1, &t->fail_to_pass,
				err);
	if (r == 0)
		r = commands_of(file, j, "pass_to_pass", 0, &t->pass_to_pass,
				err);
	json_t *budget = json_object_get(j, "budget");
	if (r == 0 && budget && !json_is_null(budget)) {
		static const char *const limits[] = {
		    "cpus", "memory", "pids", "disk", "lifetime", "idle", NULL};
		if (!json_is_object(budget))
			r = wr_error_input(err, EINVAL,
					   "%s: \"budget\": an object of the "
					   "session's limits",
					   file);
		else if ((r = keys_known(file, budget, limits, err)) == 0)
			t->budget = json_incref(budget);
	}
	json_decref(j);
	if (r < 0)
		return r;
	/* a relative path is the suite's */
	if (t->repo[0] == '.' || (t->repo[0] != '/' && strchr(t->repo, '/') &&
				  !strstr(t->repo, "://") &&
				  !strchr(t->repo, '@'))) {
		char buf[PATH_MAX];
		_cleanup_free_ char *joined =
		    wr_asprintf("%s/%s", suite_dir, t->repo);
		if (!joined)
			return wr_error_set(err, ENOMEM, "%s", file);
		if (!realpath(joined, buf))
			return wr_error_input(err, errno,
					      "%s: \"repo\": %s: %s", file,
					      joined, strerror(errno));
		free(t->repo);
		t->repo = wr_strdup(buf);
		if (!t->repo)
			return wr_error_set(err, ENOMEM, "%s", file);
	}
	_cleanup_free_ char *tests = wr_asprintf("%s/tests", t->dir);
	_cleanup_free_ char *patch = wr_asprintf("%s/solution.patch", t->dir);
	if (!tests || !patch)
		return wr_error_set(err, ENOMEM, "%s", file);
	struct stat st;
	if (lstat(tests, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return wr_error_input(err, EINVAL,
					      "%s: not a directory", tests);
		struct tests_walk w = {.files = json_object()};
		if (!w.files)
			return wr_error_set(err, ENOMEM, "%s", tests);
		r = tests_read(tests, "", &w, 0, err);
		if (r < 0) {
			json_decref(w.files);
			return r;
		}
		t->tests = w.files;
	}
	if (lstat(patch, &st) == 0) {
		size_t len;
		r = read_file(patch, EVAL_PATCH_MAX, &t->solution, &len, err);
		if (r < 0)
			return r;
		json_t *text = json_stringn(t->solution, len);
		bool ok = len && text && strlen(t->solution) == len;
		json_decref(text);
		if (!ok)
			return wr_error_input(err, EINVAL,
					      "%s: empty, or not text", patch);
	} else if (need_solution) {
		return wr_error_input(err, ENOENT,
				      "%s: missing (--oracle applies each "
				      "task's solution.patch)",
				      patch);
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct eval_task *)a)->name,
		      ((const struct eval_task *)b)->name);
}

int eval_suite_load(const char *dir, bool need_solutions,
		    struct eval_suite *out, struct wr_error **err)
{
	static const char *const keys[] = {"name", "description", NULL};
	struct eval_suite s = {0};
	char buf[PATH_MAX];
	if (!realpath(dir, buf))
		return wr_error_input(err, errno, "suite %s: %s", dir,
				      strerror(errno));
	s.dir = wr_strdup(buf);
	_cleanup_free_ char *file = wr_asprintf("%s/suite.json", buf);
	if (!s.dir || !file)
		return wr_error_set(err, ENOMEM, "suite");
	json_t *j = eval_read_json(s.dir, "suite.json", err);
	int r = j ? keys_known(file, j, keys, err) : -EINVAL;
	if (r == 0)
		r = string_of(file, j, "name", true, EVAL_NAME_MAX, &s.name,
			      err);
	if (r == 0)
		r = string_of(file, j, "description", false, 4096,
			      &s.description, err);
	json_decref(j);
	DIR *d = r == 0 ? opendir(s.dir) : NULL;
	if (r == 0 && !d)
		r = wr_error_input(err, errno, "%s: %s", s.dir,
				   strerror(errno));
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", s.dir, e->d_name);
		struct stat st;
		if (!path || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* suite.json, a README */
		if (!part_valid(e->d_name) || strlen(e->d_name) > EVAL_NAME_MAX) {
			r = wr_error_input(err, EINVAL,
					   "%s: a task's name is 1 to %d of "
					   "[A-Za-z0-9._-]",
					   path, EVAL_NAME_MAX);
			break;
		}
		if (s.n_tasks >= EVAL_TASKS_MAX) {
			r = wr_error_input(err, E2BIG,
					   "%s: more than %d tasks", s.dir,
					   EVAL_TASKS_MAX);
			break;
		}
		struct eval_task *nt =
		    wr_realloc(s.tasks, (s.n_tasks + 1) * sizeof(*nt));
		if (!nt) {
			r = wr_error_set(err, ENOMEM, "suite");
			break;
		}
		s.tasks = nt;
		r = task_load(s.dir, e->d_name, need_solutions,
			      &s.tasks[s.n_tasks], err);
		s.n_tasks++;
	}
	if (d)
		closedir(d);
	if (r == 0 && s.n_tasks == 0)
		r = wr_error_input(err, ENOENT,
				   "%s: no task (a directory with task.json)",
				   s.dir);
	if (r < 0) {
		eval_suite_clear(&s);
		return r;
	}
	qsort(s.tasks, s.n_tasks, sizeof(*s.tasks), name_cmp);
	*out = s;
	return 0;
}

void eval_suite_clear(struct eval_suite *s)
{
	for (size_t i = 0; i < s->n_tasks; i++)
		task_clear(&s->tasks[i]);
	free(s->tasks);
	free(s->dir);
	free(s->name);
	free(s->description);
	memset(s, 0, sizeof(*s));
}
