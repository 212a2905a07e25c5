/* github-app.h: the token spur uses for an org's GitHub API and git: configured, or a GitHub App's. */
#ifndef SPUR_GITHUB_APP_H
#define SPUR_GITHUB_APP_H

#include <stddef.h>
#include <stdint.h>

#include "source.h"

struct doctor;
struct engine;
struct org;

/* orgs.NAME.github (source-github.c parses it). */
struct org_github {
	struct secret	*webhook_secret;
	struct secret	*token;
	long long	 app_id;		/* 0: none */
	struct secret	*private_key;
	char		*api_url;
	char		*git_url;
};

#define GITHUB_API_URL	"https://api.github.com"	/* github.api_url's default */
#define GITHUB_REPORT_MAX	65000	/* a comment's or description's body, in bytes */

/* The org's section, NULL when it has none. */
const struct org_github *github_conf(const struct org *);
/* The org's API base (github.api_url), no trailing slash. */
char		*github_api_base(const struct org *);

/*
 * The token for org (acting on repository owner/repo): the configured token,
 * else a GitHub App installation token (installation from the event, 0: looked
 * up for the repository, or for the GitHub org when repo is an owner alone,
 * without a slash), cached until shortly before it expires. The callback
 * always comes later, from the loop; NULL is never returned.
 */
struct source_cred *github_token(struct engine *, const char *org, const char *repo,
		     long long installation, source_cred_cb, void *);
/* No callback after this. */
void		 github_req_cancel(struct source_cred *);
/* Forgets every cached installation token. */
void		 github_app_cleanup(void);

/* GitHub as a forge (forge.h): git's URL, the pull requests' API. */
extern const struct forge github_forge;
/* A run's MCP tools on its own repository and item (runmcp.c, SPEC 18). */
extern const struct source_tool github_tools[];
/* spur doctor: the org's token or App at GitHub's API (source.h doctor). */
void		 github_doctor(struct doctor *, const struct org *);

/*
 * The App's JWT: RS256 over {"iat": now - 60, "exp": now + 540, "iss": app id}
 * with the PEM private key. Pure but for the clock given; NULL with cause.
 */
char		*github_jwt(const char *pem, size_t len, long long app_id, int64_t now_s,
		     char **cause);
/*
 * Whether pem is a key github_jwt can sign with: 0, or -1 and why, a phrase
 * naming what it is instead ("is a public key (-----BEGIN PUBLIC KEY-----) ...").
 */
int		 github_key_check(const char *pem, size_t len, char **why);

#endif
