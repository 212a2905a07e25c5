/* console-github-app.h: a GitHub App made from spur's manifest, from the console (docs/github-app.md). */
#ifndef SPUR_CONSOLE_GITHUB_APP_H
#define SPUR_CONSOLE_GITHUB_APP_H

struct engine;

/*
 * The page whose button posts org's App manifest to GitHub, for the account
 * owner (an organization's login; "": the person's own), with state in the
 * form's address. *form_action: the GitHub origin the page's CSP must allow.
 * Both to free; NULL when the org's GitHub address is no origin.
 */
char	*console_github_app_form(struct engine *, const char *org, const char *owner,
	     const char *state, char **form_action);

/* The answer's status and its page (HTML, to free). Always later, from the loop; once. */
typedef void (*console_github_app_cb)(int status, char *html, void *arg);
/*
 * Loop, async: GitHub's code for the App it made -> its id, key and webhook
 * secret (POST {api}/app-manifests/{code}/conversions), written 0600 under
 * data_dir/github-apps/ as ORG-ID.pem and ORG-ID.webhook-secret (never over a
 * file), and a page with the spur.yaml lines that use them.
 */
void	 console_github_app_created(struct engine *, const char *org, const char *user,
	     const char *code, console_github_app_cb, void *arg);

#endif
