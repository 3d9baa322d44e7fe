/* test_evidence.c - the judging rules of a change's entries
 * (review/evidence.h): ".git" components in any case, and symlinks that
 * leave the tree or point into .git. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "review/evidence.h"

static void dotgit_components(void **state)
{
	(void)state;
	static const char *const refused[] = {
	    ".git", ".git/config", "a/.git", "a/.git/hooks/pre-commit",
	    ".GIT", "sub/.Git/x", "deep/er/.gIT",
	};
	static const char *const accepted[] = {
	    ".gitignore", ".github/workflows/ci.yml", "a/.gitmodules",
	    "git", "a.git", ".git2/x", "x/.gitx", "src/main.c",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (!evidence_path_has_dotgit(refused[i]))
			fail_msg("'%s' should have a .git component", refused[i]);
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
		if (evidence_path_has_dotgit(accepted[i]))
			fail_msg("'%s' has no .git component", accepted[i]);
}

static void symlinks(void **state)
{
	(void)state;
	static const char *const inside[][2] = {
	    {"link", "README"},	     {"a/link", "../README"},
	    {"a/b/link", "../../x"}, {"a/link", "./b/../c"},
	    {"link", "a/b/c"},	     {"a/link", "b"},
	};
	static const char *const outside[][2] = {
	    {"link", "/etc/passwd"}, {"link", "../x"},
	    {"a/link", "../../x"},   {"a/b/link", "../../../etc"},
	    {"link", ".git/config"}, {"a/link", "../.git"},
	    {"link", "x/.GIT/hooks"}, {"link", ""},
	    {"link", "a/../../b"},
	};
	for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
		if (!evidence_symlink_inside(inside[i][0], inside[i][1]))
			fail_msg("%s -> %s stays inside", inside[i][0],
				 inside[i][1]);
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
		if (evidence_symlink_inside(outside[i][0], outside[i][1]))
			fail_msg("%s -> %s leaves the tree or enters .git",
				 outside[i][0], outside[i][1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(dotgit_components),
	    cmocka_unit_test(symlinks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
