/* slack.c - placeholder until the Slack routes land: 404. */
#include "api/internal.h"

int api_slack_command(struct api *a, const struct api_request *req,
		      struct api_response *out)
{
	(void)a;
	(void)req;
	return api_reply_error(out, 404, "Slack is not configured");
}

int api_slack_event(struct api *a, const struct api_request *req,
		    struct api_response *out)
{
	(void)a;
	(void)req;
	return api_reply_error(out, 404, "Slack is not configured");
}
