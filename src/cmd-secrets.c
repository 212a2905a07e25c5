/* cmd-secrets.c: `spur secrets set|list|rm|rekey`: the store's sealed secrets (SPEC section 15). */
#include "spur.h"
#include "cmd.h"
#include "conf.h"
#include "secrets.h"
#include "store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct secrets_opts {
	const char	*config;
	const char	*org;
	const char	*header;
	const char	*new_key;
	char		*hosts[SECRETS_HOSTS_MAX + 1];
	size_t		 nhosts;
	int		 json;
};

static int
secrets_getopt(int argc, char **argv, struct secrets_opts *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "host", required_argument, NULL, 'H' },
		{ "header", required_argument, NULL, 'h' },
		{ "new-key", required_argument, NULL, 'k' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	int	 ch;

	memset(o, 0, sizeof *o);
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o->config = optarg; break;
		case 'o': o->org = optarg; break;
		case 'h': o->header = optarg; break;
		case 'k': o->new_key = optarg; break;
		case 'j': o->json = 1; break;
		case 'H':
			if (o->nhosts == SECRETS_HOSTS_MAX) {
				fprintf(stderr, "spur secrets: at most %d --host\n",
				    SECRETS_HOSTS_MAX);
				return -1;
			}
			o->hosts[o->nhosts++] = optarg;
			break;
		default:
			return -1;
		}
	}
	if (o->config == NULL)
		o->config = config_default_path();
	return optind;
}

/* The value from standard input (never argv, never a terminal echo): one final newline cut. */
static char *
secrets_read_stdin(size_t *len)
{
	char	*v = xmalloc(SECRETS_VALUE_MAX + 2);
	size_t	 n = 0;
	ssize_t	 r;

	while (n < SECRETS_VALUE_MAX + 1 && (r = read(STDIN_FILENO, v + n,
	    SECRETS_VALUE_MAX + 1 - n)) != 0) {
		if (r < 0) {
			explicit_bzero(v, n);
			free(v);
			return NULL;
		}
		n += (size_t)r;
	}
	if (n > 0 && v[n - 1] == '\n')
		n--;
	if (n > 0 && v[n - 1] == '\r')
		n--;
	v[n] = '\0';
	*len = n;
	return v;
}

static int
secrets_set(const struct secrets_opts *o, const char *name, struct store *st,
    const struct config *conf)
{
	char	*value, *cause = NULL;
	size_t	 len;
	int	 rc;

	if (isatty(STDIN_FILENO))
		fprintf(stderr, "spur secrets set: reading the value of %s from standard "
		    "input (end with ^D)\n", name);
	if ((value = secrets_read_stdin(&len)) == NULL) {
		fprintf(stderr, "spur secrets set: cannot read standard input\n");
		return EXIT_FAILED;
	}
	rc = secrets_put(conf, st, o->org, name, value, len, o->nhosts > 0 ?
	    (char *const *)o->hosts : NULL, o->header, &cause);
	explicit_bzero(value, len);
	free(value);
	if (rc != 0) {
		fprintf(stderr, "spur secrets set: %s\n", cause);
		free(cause);
		return EXIT_FAILED;
	}
	fprintf(stderr, "spur secrets set: %s of org %s sealed (%s)\n", name, o->org,
	    o->nhosts > 0 ? "header" : "env");
	return EXIT_OK;
}

static int
secrets_list(const struct secrets_opts *o, struct store *st)
{
	json_t		*list = store_secrets_json(st, o->org), *s, *h;
	const char	*header;
	size_t		 i, j;
	char		*name;

	if (o->json) {
		cmd_print_json(list);
		json_decref(list);
		return EXIT_OK;
	}
	printf("%-12s %-24s %-6s %-24s %s\n", "ORG", "NAME", "KIND", "UPDATED", "HOSTS");
	json_array_foreach(list, i, s) {
		name = term_safe(json_string_value(json_object_get(s, "name")), 0);
		printf("%-12s %-24s %-6s %-24s ", json_string_value(json_object_get(s, "org")),
		    name, json_string_value(json_object_get(s, "kind")),
		    json_string_value(json_object_get(s, "updated_at")));
		free(name);
		json_array_foreach(json_object_get(s, "hosts"), j, h)
			printf("%s%s", j > 0 ? "," : "", json_string_value(h));
		if ((header = json_string_value(json_object_get(s, "header"))) != NULL) {
			name = term_safe(header, 0);
			printf(" (%s)", name);
			free(name);
		}
		printf("%s\n", json_array_size(json_object_get(s, "hosts")) == 0 ? "-" : "");
	}
	json_decref(list);
	return EXIT_OK;
}

static int
secrets_rm(const struct secrets_opts *o, const char *name, struct store *st)
{
	switch (store_secret_delete(st, o->org, name)) {
	case 0:
		fprintf(stderr, "spur secrets rm: %s of org %s removed\n", name, o->org);
		return EXIT_OK;
	case 1:
		fprintf(stderr, "spur secrets rm: no sealed secret %s in org %s\n", name, o->org);
		return EXIT_FAILED;
	default:
		fprintf(stderr, "spur secrets rm: cannot store the removal\n");
		return EXIT_FAILED;
	}
}

struct rekey_rows {
	struct store_secret	*rows;
	size_t			 n;
};

static int
secrets_rekey_collect_cb(struct store_secret *r, void *arg)
{
	struct rekey_rows	*rr = arg;

	rr->rows = xreallocarray(rr->rows, rr->n + 1, sizeof *rr->rows);
	rr->rows[rr->n++] = *r;
	memset(r, 0, sizeof *r);	/* taken */
	return 0;
}

/*
 * Every value opened with secrets.key and sealed again under the new key, in
 * one transaction: all or nothing. The operator then points secrets.key at
 * the new key and restarts (or reloads) the engine.
 */
static int
secrets_rekey(const struct secrets_opts *o, struct store *st, const struct config *conf)
{
	unsigned char		 oldkey[SECRETS_KEY_LEN], newkey[SECRETS_KEY_LEN];
	struct rekey_rows	 rr = { NULL, 0 };
	struct store_secret	*r;
	char			*cause = NULL, *value, *aad;
	unsigned char		*sealed;
	size_t			 i, len, aadlen, sealedlen;
	int			 rc = EXIT_FAILED;

	if (o->new_key == NULL) {
		fprintf(stderr, "spur secrets rekey: --new-key env:NAME|file:PATH is required\n");
		return EXIT_USAGE;
	}
	if (secrets_key_get(conf, oldkey, &cause) != 0 ||
	    secrets_key_from_ref(".", o->new_key, newkey, &cause) != 0) {
		fprintf(stderr, "spur secrets rekey: %s\n", cause);
		free(cause);
		goto out;
	}
	if (store_tx_begin(st, &cause) != 0) {
		fprintf(stderr, "spur secrets rekey: %s\n", cause);
		free(cause);
		goto out;
	}
	if (store_secrets_each(st, NULL, secrets_rekey_collect_cb, &rr) != 0) {
		fprintf(stderr, "spur secrets rekey: the store's secrets cannot be read\n");
		goto abort;
	}
	for (i = 0; i < rr.n; i++) {
		r = &rr.rows[i];
		if (secrets_row_open(conf, oldkey, r, &value, &len, &cause) != 0) {
			fprintf(stderr, "spur secrets rekey: %s; nothing changed\n", cause);
			free(cause);
			goto abort;
		}
		aad = secrets_aad(r->org, r->name, r->hosts, r->header, &aadlen);
		rc = secrets_seal(newkey, aad, aadlen, value, len, r->nonce, &sealed, &sealedlen);
		explicit_bzero(value, len);
		free(value);
		free(aad);
		if (rc != 0) {
			fprintf(stderr, "spur secrets rekey: cannot seal %s; nothing changed\n",
			    r->name);
			rc = EXIT_FAILED;
			goto abort;
		}
		free(r->sealed);
		r->sealed = sealed;
		r->sealedlen = sealedlen;
		r->noncelen = SECRETS_NONCE_LEN;
		if (store_secret_put(st, r) != 0) {
			fprintf(stderr, "spur secrets rekey: the store refused %s; nothing "
			    "changed\n", r->name);
			rc = EXIT_FAILED;
			goto abort;
		}
	}
	if (store_tx_commit(st, &cause) != 0) {
		fprintf(stderr, "spur secrets rekey: %s; nothing changed\n", cause);
		free(cause);
		rc = EXIT_FAILED;
		goto out;
	}
	printf("%zu sealed secret%s sealed again under %s: set secrets.key to it and "
	    "restart spur serve (or send it SIGHUP)\n", rr.n, rr.n == 1 ? "" : "s",
	    o->new_key);
	rc = EXIT_OK;
	goto out;
abort:
	rc = EXIT_FAILED;
	store_tx_rollback(st);
out:
	for (i = 0; i < rr.n; i++)
		store_secret_clear(&rr.rows[i]);
	free(rr.rows);
	explicit_bzero(oldkey, sizeof oldkey);
	explicit_bzero(newkey, sizeof newkey);
	return rc;
}

int
cmd_secrets(const struct cmd *c, int argc, char **argv)
{
	struct secrets_opts	 o;
	struct config		*conf;
	struct store		*st;
	const char		*sub;
	int			 idx, rc, nargs;

	if ((idx = secrets_getopt(argc, argv, &o)) < 0 || idx >= argc) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	sub = argv[idx++];
	nargs = argc - idx;
	if (strcmp(sub, "set") == 0 || strcmp(sub, "rm") == 0) {
		if (nargs != 1 || o.org == NULL || o.new_key != NULL || o.json ||
		    (strcmp(sub, "rm") == 0 && (o.nhosts > 0 || o.header != NULL))) {
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	} else if (strcmp(sub, "list") == 0) {
		if (nargs != 0 || o.nhosts > 0 || o.header != NULL || o.new_key != NULL) {
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	} else if (strcmp(sub, "rekey") == 0) {
		if (nargs != 0 || o.org != NULL || o.nhosts > 0 || o.header != NULL || o.json) {
			cmd_usage(c, 1);
			return EXIT_USAGE;
		}
	} else {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if (o.header != NULL && o.nhosts == 0) {
		fprintf(stderr, "spur secrets set: --header needs at least one --host\n");
		return EXIT_USAGE;
	}
	/* Only secrets.key is read, from its reference: the shell needs no other secret. */
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if (strcmp(sub, "set") == 0)
		rc = secrets_set(&o, argv[idx], st, conf);
	else if (strcmp(sub, "list") == 0)
		rc = secrets_list(&o, st);
	else if (strcmp(sub, "rm") == 0)
		rc = secrets_rm(&o, argv[idx], st);
	else
		rc = secrets_rekey(&o, st, conf);
	store_close(st);
	config_free(conf);
	return rc;
}
