/* test-console-github.c: the GitHub authorize URL and the answers of GitHub's OAuth and membership routes. */
#include "spur.h"
#include "conf.h"
#include "console-github.h"
#include "source-github.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static struct secret	 secret = { "env:GH_OAUTH_SECRET", "oauth-client-secret-1", 21 };
static char		*teams[] = { "platform", "sre", NULL };
static struct org_console console = { "Iv1.abc+/=", &secret, "acme-gh", teams,
	"https://ghe.example.com" };
static struct org	 orgs[2];
static struct config	 cf;

static void
test_authorize_url(void)
{
	char	*u;

	memset(orgs, 0, sizeof orgs);
	orgs[0].name = "plain";
	orgs[1].name = "acme";
	cf.orgs = orgs;
	cf.norgs = 2;
	ok(!console_github_enabled(&cf), "no org with console: sign-in with GitHub not offered");
	ok(console_github_authorize_url(&cf, "st", "https://x/cb") == NULL,
	    "and no authorize URL");
	orgs[1].console = &console;
	orgs[1].console_src = &source_github;
	ok(console_github_enabled(&cf), "an org with console.github_client_id: offered");
	u = console_github_authorize_url(&cf, "s t&x=1/é",
	    "https://spur.example.com/console/auth/github/callback");
	is_str(u, "https://ghe.example.com/login/oauth/authorize?client_id=Iv1.abc%2B%2F%3D"
	    "&redirect_uri=https%3A%2F%2Fspur.example.com%2Fconsole%2Fauth%2Fgithub%2Fcallback"
	    "&scope=read%3Aorg&state=s%20t%26x%3D1%2F%C3%A9&allow_signup=false",
	    "the authorize URL: github_url, every value percent-encoded, scope read:org");
	ok(u != NULL && strstr(u, secret.value) == NULL, "the client secret is not in it");
	free(u);
}

static void
test_secrets(void)
{
	const struct secret	*all[8];
	size_t			 n, i;
	int			 found = 0;

	n = config_secrets(&cf, all, 8);
	for (i = 0; i < n && i < 8; i++)
		found |= all[i] == &secret;
	ok(found, "the client secret is one of the config's secrets (scrubbed like the others)");
}

static void
test_token(void)
{
	char		*tok, *cause = NULL;
	const char	*good = "{\"access_token\":\"gho_16C7e42F292c6912E7710c838347Ae178B4a\","
	    "\"scope\":\"read:org\",\"token_type\":\"bearer\"}";
	const char	*bad = "{\"error\":\"bad_verification_code\",\"error_description\":"
	    "\"The code passed is incorrect or expired.\",\"error_uri\":\"https://docs.github.com/"
	    "apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/"
	    "#bad-verification-code\"}";
	const char	*odd = "{\"error\":\"<script>alert(1)</script>\"}";

	tok = console_github_parse_token(200, good, strlen(good), &cause);
	is_str(tok, "gho_16C7e42F292c6912E7710c838347Ae178B4a", "an access token is read");
	free(tok);
	/* GitHub answers 200 with an error object for a bad code. */
	tok = console_github_parse_token(200, bad, strlen(bad), &cause);
	ok(tok == NULL, "an error answer gives no token");
	is_str(cause, "GitHub refused the sign-in (bad_verification_code): the code was used "
	    "already or is older than 10 minutes, sign in again", "and says why");
	free(cause);
	cause = NULL;
	tok = console_github_parse_token(200, "{\"error\":\"incorrect_client_credentials\"}", 40,
	    &cause);
	ok(tok == NULL && cause != NULL && strstr(cause, "misconfigured") != NULL,
	    "wrong client credentials: the operator's problem, said so");
	free(cause);
	cause = NULL;
	tok = console_github_parse_token(200, odd, strlen(odd), &cause);
	is_str(cause, "GitHub answered the sign-in with HTTP 200",
	    "an error code that is not GitHub's form is not repeated");
	free(cause);
	cause = NULL;
	tok = console_github_parse_token(502, "<html>", 6, &cause);
	is_str(cause, "GitHub answered the sign-in with HTTP 502", "a 502");
	free(cause);
	cause = NULL;
	tok = console_github_parse_token(0, "", 0, &cause);
	is_str(cause, "GitHub did not answer the sign-in", "no answer");
	free(cause);
	cause = NULL;
	tok = console_github_parse_token(200, "{\"access_token\":\"\"}", 19, &cause);
	ok(tok == NULL, "an empty token is none");
	free(cause);
}

static void
test_active(void)
{
	const char	*org = "{\"url\":\"https://api.github.com/orgs/acme/memberships/octocat\","
	    "\"state\":\"active\",\"role\":\"member\",\"organization_url\":"
	    "\"https://api.github.com/orgs/acme\",\"organization\":{\"login\":\"acme\"},"
	    "\"user\":{\"login\":\"octocat\"}}";
	const char	*pending = "{\"url\":\"x\",\"role\":\"member\",\"state\":\"pending\"}";

	ok(console_github_active(200, org, strlen(org)), "an active org membership");
	ok(!console_github_active(200, pending, strlen(pending)),
	    "a pending invitation is not membership");
	ok(!console_github_active(404, "{\"message\":\"Not Found\"}", 23), "404: not a member");
	ok(!console_github_active(200, "[{\"state\":\"active\"}]", 20), "not an object");
	ok(!console_github_active(200, "garbage", 7), "garbage");
}

static void
test_login(void)
{
	ok(console_github_login_valid("octocat"), "octocat");
	ok(console_github_login_valid("Oct0-cat"), "Oct0-cat");
	ok(!console_github_login_valid("../admin"), "../admin is not a login");
	ok(!console_github_login_valid("a/b"), "a/b");
	ok(!console_github_login_valid("-x"), "a leading -");
	ok(!console_github_login_valid(""), "empty");
	ok(!console_github_login_valid(NULL), "none");
	ok(!console_github_login_valid("dependabot[bot]"), "a bot");
	ok(!console_github_login_valid("a234567890123456789012345678901234567890"),
	    "longer than GitHub's 39");
}

int
main(void)
{
	test_authorize_url();
	test_secrets();
	test_token();
	test_active();
	test_login();
	return tap_done();
}
