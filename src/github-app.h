/* github-app.h: the token spur uses for an org's GitHub API and git: configured, or a GitHub App's. */
#ifndef SPUR_GITHUB_APP_H
#define SPUR_GITHUB_APP_H

#include <stddef.h>
#include <stdint.h>

struct engine;
struct github_req;

/*
 * token is NULL when cause says why; both are only valid during the call.
 * permanent: the cause is the configuration's (no token or App, a key that
 * cannot sign), which no retry changes.
 */
typedef void (*github_token_cb)(const char *token, const char *cause, int permanent, void *);

/*
 * The token for org (acting on repository owner/repo): the configured token,
 * else a GitHub App installation token (installation from the event, 0: looked
 * up for the repository, or for the GitHub org when repo is an owner alone,
 * without a slash), cached until shortly before it expires. The callback
 * always comes later, from the loop; NULL is never returned.
 */
struct github_req *github_token(struct engine *, const char *org, const char *repo,
		     long long installation, github_token_cb, void *);
/* No callback after this. */
void		 github_req_cancel(struct github_req *);
/* Forgets every cached installation token. */
void		 github_app_cleanup(void);

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
