/*
 * forge.h: where repositories live and pull requests open. A system of the
 * table (source.h) that is a forge points its forge at one of these; repo.c
 * clones, pushes and opens pull requests through it and names no forge.
 */
#ifndef SPUR_FORGE_H
#define SPUR_FORGE_H

#include <stddef.h>
#include <jansson.h>

struct org;

/* The calls repo.c makes of a forge's API, in the order a delivery may make them. */
enum forge_op {
	FORGE_PR_INFO,		/* a pull request's branches (pr: repo, number) */
	FORGE_PR_CREATE,	/* open one (repo, title, branch, base, body, draft) */
	FORGE_PR_FIND,		/* the open one whose head is branch (repo, branch) */
	FORGE_PR_REVIEWERS,	/* ask list for reviews (repo, number, list) */
	FORGE_PR_LABELS,	/* label it with list (repo, number, list) */
	FORGE_PR_UPDATE,	/* its description anew (repo, number, body) */
};

/* What a call is about. */
struct forge_pr {
	const char	*repo;		/* OWNER/NAME */
	long long	 number;
	const char	*branch;
	const char	*base;
	const char	*title;
	const char	*body;
	int		 draft;
	const json_t	*list;		/* reviewers' logins (or ids: user_id_request), labels */
};

/* The call: method, the path under the API's URL, the JSON body (NULL: none). */
struct forge_request {
	const char	*method;
	char		*path;
	char		*body;
};

/* What an answer says; forge_answer_clear frees it. */
struct forge_answer {
	/*
	 * 1: what was asked is there; 0: it is not (failed, none found);
	 * -1: FORGE_PR_CREATE only: one is open for the branch already.
	 */
	int		 ok;
	char		*url;		/* the pull request's web address */
	long long	 number;
	char		*head_ref;	/* INFO: the branches, as the answer names them */
	char		*base_ref;
	char		*head_repo;	/* INFO: the head's repository (a fork's), NULL: deleted */
	char		*body;		/* FIND: its description */
};

struct forge {
	/* Where git reaches repo (OWNER/NAME) for org: no credential in it. */
	char		*(*git_url)(const struct org *, const char *repo);
	/* The user name git sends the token with (HTTP Basic). */
	const char	*git_user;
	/* The ref a pull request's head is fetched by when its branch is not ours. */
	char		*(*pr_ref)(long long number);
	/* Every API call's headers besides Authorization and Content-Type (NULL-terminated). */
	const char *const *headers;
	void		 (*request)(enum forge_op, const struct forge_pr *,
			    struct forge_request *);
	/*
	 * The answer of op about pr (the call's, for a forge whose list of pull
	 * requests cannot be filtered by head): status, its body as JSON (NULL: none).
	 */
	void		 (*answer)(enum forge_op, const struct forge_pr *, int status,
			    const json_t *, struct forge_answer *);
	/* A pull request's description at most, in bytes. */
	size_t		 body_max;
	/*
	 * The event's pull request (its number) when the event is about one of
	 * repo's own, else 0: the run works on its branch.
	 */
	long long	 (*event_pr)(const json_t *event, const char *repo);
	/* 1: a repository's name may be GROUP/SUB/.../NAME (nested groups), not only OWNER/NAME. */
	int		 nested_names;
	/*
	 * NULL, or reviewers are asked by user id: repo.c asks this call of each
	 * login (cached), user_id reads the id from its answer (status, JSON body;
	 * 0: no such user), and FORGE_PR_REVIEWERS gets a list of integers.
	 */
	void		 (*user_id_request)(const char *login, struct forge_request *);
	long long	 (*user_id)(int status, const json_t *);
};

void	forge_answer_clear(struct forge_answer *);

#endif
