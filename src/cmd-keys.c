/* cmd-keys.c: `spur keys create|list|revoke`: the org API's keys (SPEC section 12). */
#include "spur.h"
#include "cmd.h"
#include "conf.h"
#include "keys.h"
#include "store.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct keys_opts {
	const char	*config;
	const char	*org;
	const char	*name;
	const char	*expires;
	unsigned	 scopes;
	int		 json;
};

static int
keys_getopt(const struct cmd *c, int argc, char **argv, struct keys_opts *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "org", required_argument, NULL, 'o' },
		{ "name", required_argument, NULL, 'n' },
		{ "scope", required_argument, NULL, 's' },
		{ "expires", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	unsigned	 bit;
	int		 ch;

	memset(o, 0, sizeof *o);
	while ((ch = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o->config = optarg; break;
		case 'o': o->org = optarg; break;
		case 'n': o->name = optarg; break;
		case 'e': o->expires = optarg; break;
		case 'j': o->json = 1; break;
		case 's':
			if ((bit = key_scope_parse(optarg)) == 0) {
				fprintf(stderr, "spur keys: unknown scope \"%s\" (sessions:read, "
				    "sessions:write, runs:read, runs:write, automations:read, "
				    "secrets:write, secrets:use, mcp)\n", optarg);
				return -1;
			}
			o->scopes |= bit;
			break;
		default:
			return -1;
		}
	}
	if (o->config == NULL)
		o->config = config_default_path();
	return optind;
}

static int
keys_create(const struct keys_opts *o, struct store *st, const struct config *conf)
{
	struct store_key	 row;
	long long		 secs = 0;
	int64_t			 expires = 0;
	char			*cause = NULL, *key, ts[40];
	json_t			*j;

	if (o->org == NULL) {
		fprintf(stderr, "spur keys create: --org ORG is required\n");
		return EXIT_USAGE;
	}
	if (config_org(conf, o->org) == NULL) {
		fprintf(stderr, "spur keys create: no org \"%s\" in the config\n", o->org);
		return EXIT_FAILED;
	}
	if (o->expires != NULL) {
		if (parse_duration(o->expires, &secs, &cause) != 0 || secs <= 0) {
			fprintf(stderr, "spur keys create: --expires %s: %s\n", o->expires,
			    cause != NULL ? cause : "must be a positive duration");
			free(cause);
			return EXIT_USAGE;
		}
		expires = now_ms() + secs * 1000;
	}
	key_make(o->org, o->name, o->scopes != 0 ? o->scopes : SCOPE_DEFAULT, expires, &key,
	    &row);
	if (store_key_add(st, &row) != 0) {
		fprintf(stderr, "spur keys create: cannot store the key\n");
		explicit_bzero(key, strlen(key));
		free(key);
		store_key_clear(&row);
		return EXIT_FAILED;
	}
	/* The only time the key is shown: stdout, never a log. */
	if (o->json) {
		j = json_pack("{s:s,s:s,s:s,s:o,s:s,s:o}", "id", row.id, "key", key, "org",
		    row.org, "name", row.name != NULL ? json_string(row.name) : json_null(),
		    "scopes", row.scopes, "expires_at", expires != 0 ?
		    json_string(format_time(expires, ts, sizeof ts)) : json_null());
		cmd_print_json(j);
		json_decref(j);
	} else {
		printf("%s\n", key);
		fprintf(stderr, "spur keys create: %s for org %s (scopes: %s%s%s); the key "
		    "above is shown once and never again\n", row.id, row.org, row.scopes,
		    expires != 0 ? "; expires " : "", expires != 0 ?
		    format_time(expires, ts, sizeof ts) : "");
	}
	explicit_bzero(key, strlen(key));
	free(key);
	store_key_clear(&row);
	return EXIT_OK;
}

static const char *
keys_str(const json_t *k, const char *name)
{
	const char	*s = json_string_value(json_object_get(k, name));

	return s != NULL ? s : "-";
}

static int
keys_list(const struct keys_opts *o, struct store *st)
{
	json_t		*list = store_keys_json(st, o->org), *k;
	size_t		 i;
	char		*name;

	if (o->json) {
		cmd_print_json(list);
		json_decref(list);
		return EXIT_OK;
	}
	printf("%-21s %-12s %-16s %-24s %-24s %-24s %s\n", "ID", "ORG", "NAME", "CREATED",
	    "LAST USED", "EXPIRES", "SCOPES");
	json_array_foreach(list, i, k) {
		name = term_safe(keys_str(k, "name"), 0);
		printf("%-21s %-12s %-16s %-24s %-24s %-24s %s%s\n", keys_str(k, "id"),
		    keys_str(k, "org"), name, keys_str(k, "created_at"),
		    keys_str(k, "last_used"), keys_str(k, "expires_at"), keys_str(k, "scopes"),
		    json_is_string(json_object_get(k, "revoked_at")) ? " (revoked)" : "");
		free(name);
	}
	json_decref(list);
	return EXIT_OK;
}

static int
keys_revoke(const char *id, struct store *st)
{
	switch (store_key_revoke(st, id, now_ms())) {
	case 0:
		printf("%s revoked\n", id);
		return EXIT_OK;
	case 1:
		fprintf(stderr, "spur keys revoke: no such key %s, or already revoked\n", id);
		return EXIT_FAILED;
	default:
		fprintf(stderr, "spur keys revoke: cannot store the revocation\n");
		return EXIT_FAILED;
	}
}

int
cmd_keys(const struct cmd *c, int argc, char **argv)
{
	struct keys_opts	 o;
	struct config		*conf;
	struct store		*st;
	const char		*sub;
	int			 idx, rc;

	if ((idx = keys_getopt(c, argc, argv, &o)) < 0 || idx >= argc) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	sub = argv[idx++];
	if ((strcmp(sub, "revoke") == 0) != (argc - idx == 1) || (strcmp(sub, "revoke") != 0 &&
	    argc != idx) || (strcmp(sub, "create") != 0 && strcmp(sub, "list") != 0 &&
	    strcmp(sub, "revoke") != 0) || (strcmp(sub, "create") != 0 && (o.name != NULL ||
	    o.scopes != 0 || o.expires != NULL))) {
		cmd_usage(c, 1);
		return EXIT_USAGE;
	}
	if ((st = cmd_store(o.config, &conf)) == NULL)
		return EXIT_FAILED;
	if (strcmp(sub, "create") == 0)
		rc = keys_create(&o, st, conf);
	else if (strcmp(sub, "list") == 0)
		rc = keys_list(&o, st);
	else
		rc = keys_revoke(argv[idx], st);
	store_close(st);
	config_free(conf);
	return rc;
}
