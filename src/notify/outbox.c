/* outbox.c - what every backend of Slack's outbox shares (outbox.h): the
 * names of the kinds of post, as stored, and the destructors of the posts
 * it hands out. */
#include "notify/outbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[SLACK_POST_KIND_MAX] = {
    [SLACK_POST_OUTCOME] = "outcome",
    [SLACK_POST_REPLY] = "reply",
    [SLACK_POST_EPHEMERAL] = "ephemeral",
};

const char *slack_post_kind_name(enum slack_post_kind k)
{
	if ((int)k < 0 || k >= SLACK_POST_KIND_MAX)
		return NULL;
	return kind_names[k];
}

int slack_post_kind_parse(const char *text)
{
	if (!text)
		return -EINVAL;
	for (int i = 0; i < SLACK_POST_KIND_MAX; i++)
		if (!strcmp(text, kind_names[i]))
			return i;
	return -EINVAL;
}

void slack_post_clear(struct slack_post *p)
{
	if (!p)
		return;
	free(p->channel);
	free(p->thread_ts);
	free(p->response_url);
	free(p->slack_user);
	free(p->text);
	free(p->posted_state);
	free(p->last_error);
	memset(p, 0, sizeof(*p));
}

void slack_posts_free(struct slack_post *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		slack_post_clear(&v[i]);
	free(v);
}
