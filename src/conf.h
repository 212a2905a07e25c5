/* conf.h: spur.yaml as loaded and validated; secrets resolved from env: and file: references. */
#ifndef SPUR_CONFIG_H
#define SPUR_CONFIG_H

#include <stddef.h>

struct yerrs;
struct env_conf;
struct cfgctx;
struct ynode;
struct source;

/*
 * A secret. ref ("env:NAME", "file:PATH") may be shown; value never is. value
 * is NULL (len 0) in a config loaded with CONFIG_UNRESOLVED.
 */
struct secret {
	char	*ref;
	char	*value;
	size_t	 len;
};

/* orgs.NAME.api: the org API (SPEC section 12). */
struct org_api {
	struct secret	*callback_secret;	/* whsec_...: signs callback_url reports; NULL: none */
	char		**repositories;		/* NULL-terminated globs a session may name; NULL: none */
	char		**callbacks_allow;	/* api.callbacks.allow: non-public addresses and CIDRs
						   callbacks and report webhooks may reach; NULL: none */
};

/* orgs.NAME.<system>: which system (source.h), and what its conf_parse made. */
struct org_section {
	const struct source	*src;
	void			*conf;
};

struct named_secret {
	char		*name;
	struct secret	*secret;
};

struct org {
	char			*name;
	struct org_section	*sources;	/* each system's section (source.h) */
	size_t			 nsources;
	struct named_secret	*agents;	/* agent name -> model API key */
	size_t			 nagents;
	struct named_secret	*secrets;	/* automation-visible secrets */
	size_t			 nsecrets;
	/* Sealed in the store (secrets.c secrets_attach): names, values once unsealed. */
	struct named_secret	*sealed;
	char			***sealed_hosts; /* of sealed[i] when a header secret, else NULL */
	size_t			 nsealed;
	struct env_conf		*environment;	/* the automations' default (env.h); NULL: none */
	struct org_api		*api;		/* NULL when not configured */
	/* orgs.NAME.console: who may see it, parsed by the system people sign in with. */
	void			*console;	/* NULL: no sign-in for it */
	const struct source	*console_src;	/* the system whose console_parse made it */
	double			 budget_usd_per_day;	/* orgs.NAME.budget; 0: none */
	double			 budget_usd_per_month;
};

struct price;

struct agent_conf {
	char		 *name;
	char		**command;	/* NULL-terminated argv, NULL: the agent's default */
	char		 *api_url;	/* NULL: the vendor's */
	struct price	 *prices;	/* agents.NAME.prices, before the defaults (budget.h) */
	size_t		  nprices;
};

enum sandbox_backend { SANDBOX_BWRAP, SANDBOX_NONE };

struct config {
	int			 refs;		/* config_free drops one; the last frees */
	char			*file;
	char			*dir;		/* directory of file: relative paths start here */
	char			**listen;
	size_t			 nlisten;
	char			*metrics_listen;	/* metrics.listen: /metrics there alone; NULL: beside the rest */
	char			*data_dir;	/* absolute */
	char			*user;		/* user: the engine's, started as root; NULL: stays root */
	char			*helper_socket;	/* helper_socket: spur helper's socket; NULL: forked */
	char			*store_url;	/* store: postgresql://... (several nodes); NULL: sqlite3 in data_dir */
	int			 store_notify;	/* store_notify: LISTEN/NOTIFY wake-ups between nodes */
	int			 store_prepare;	/* store_prepare: server-side prepared statements */
	char			*automations_dir; /* absolute */
	char			*public_url;
	unsigned long long	 limit_body;
	unsigned long long	 limit_unsigned_body; /* the body of a hook with auth: none */
	unsigned long long	 limit_header;	/* all request headers together */
	int			 limit_headers;	/* header count */
	long long		 limit_idle;	/* seconds a connection may stay silent */
	long long		 limit_request;	/* seconds to read one whole request */
	unsigned long long	 limit_buffered; /* bytes of requests being read, all together */
	unsigned long long	 limit_artifacts; /* a run's artifacts kept (runfile.c), 0: none */
	int			 limit_runs;
	int			 limit_queue;
	long long		 limit_drain;	/* seconds running runs may finish after SIGTERM */
	int			 limit_model_requests; /* a run's model requests in flight at once */
	long long		 retention_events; /* seconds events are kept (>= 30d) */
	long long		 retention_run_files; /* seconds an ended run's files are kept */
	long long		 schedule_catch_up; /* seconds */
	long long		 report_give_up;	/* seconds a report is retried before it is given up */
	int			 report_progress; /* a status message in the thread, edited as the run moves */
	/*
	 * The timers, in ms: production defaults, which tests set small
	 * (config.c says each one's bounds and how they must relate).
	 */
	long long		 report_edit_ms;	/* reports.edit_interval: status edits at most this often */
	long long		 report_note_ms;	/* reports.note_interval: a run's thread_post at most this often */
	long long		 report_refresh_ms;	/* reports.refresh: a running run's time told again */
	long long		 report_backoff_ms;	/* reports.backoff: a failed report's first retry waits */
	long long		 report_lease_ms;	/* reports.lease: a report being sent is one node's */
	long long		 node_lease_ms;		/* nodes.lease: a node silent this long is dead */
	long long		 node_beat_ms;		/* nodes.beat: how often a node renews its lease */
	long long		 node_affinity_ms;	/* nodes.affinity: a follow-up waits for its session's node */
	long long		 node_output_ms;	/* nodes.output_flush: a run's output to the store this often */
	long long		 node_message_ms;	/* nodes.message_wait: a message's answer waits for another node */
	char			*git_author_name;	/* of the commits spur makes */
	char			*git_author_email;
	char			*egress_ca_file;	/* trust for intercepted upstreams; NULL: system */
	char			**mcp_origins;	/* mcp.allowed_origins, NULL-terminated; NULL: none */
	char			**trusted_proxies; /* peers whose X-Forwarded-For is believed; NULL: none */
	int			  forwarded_rfc7239; /* theirs is Forwarded:, not X-Forwarded-For */
	int			 log_json;	/* log.format: json (else text: key=value) */
	struct {
		enum sandbox_backend	 backend;
		char			*user;
		long long		 timeout;
		unsigned long long	 memory;
		int			 pids;
		unsigned long long	 output;
		long long		 session_idle;
		/* each session's own host uid (and gid) when spur is root: [uid_first, uid_last] */
		long long		 uid_first;
		long long		 uid_last;
		unsigned long long	 cache_size;	/* all of data_dir/cache; LRU over it */
	} sandbox;
	struct agent_conf	*agents;
	size_t			 nagents;
	/* secrets.key: seals the store's secrets (64 hex digits); NULL: none */
	struct secret		*secrets_key;
	struct org		*orgs;
	size_t			 norgs;
};

/* The installed config, found when there is no ./spur.yaml (config_default_path). */
#ifndef SPUR_SYSCONFDIR
#define SPUR_SYSCONFDIR	"/usr/local/etc"
#endif
#define CONFIG_INSTALLED	SPUR_SYSCONFDIR "/spur/spur.yaml"

/*
 * contrib/spur.service's TimeoutStopSec, in seconds: limits.drain beyond it
 * less a minute is warned of (test_service checks the unit says the same).
 */
#define CONFIG_UNIT_STOP	660
/* limits.artifacts at most: under what the root helper hands back (PRIV_JOB_OUT_MAX). */
#define CONFIG_ARTIFACTS_MAX	(48ULL << 20)

/* config_load flags. */
#define CONFIG_UNRESOLVED	0x1	/* secrets stay references: no variable or file is read */
#define CONFIG_HOST		0x2	/* also what this host must have: the sandbox user */

/* Loads and validates; every problem is added to errs. NULL when any was found. */
struct config		*config_load(const char *path, int flags, struct yerrs *);
/* A request held by an HTTP front keeps the config it started with (atomic references). */
struct config		*config_ref(struct config *);
void			 config_free(struct config *);
const char		*config_default_path(void);
struct org		*config_org(const struct config *, const char *);
/* The org's API base for a system of source.h (org NULL: the default), no trailing slash. */
char			*config_api_url(const struct org *, const char *source);
const struct agent_conf	*config_agent(const struct config *, const char *);
struct secret		*org_secret(const struct org *, const char *);
struct secret		*org_agent_key(const struct org *, const char *);
/* Whether an automation may name it: configured in orgs.NAME.secrets or sealed in the store. */
int			 org_secret_known(const struct org *, const char *);
/* Frees a secret (its value wiped). */
void			 secret_free(struct secret *);
/* Every resolved secret value of the config, for tests and log scrubbing. */
size_t			 config_secrets(const struct config *, const struct secret **, size_t);

/*
 * Parses yaml as orgs.NAME.<system> into o (tests build their orgs in
 * memory); -1 with the first error.
 */
int			 config_org_section(struct org *, const char *system, const char *yaml,
			     char **cause);

/*
 * The leaf parsers (cfg.c) a section's parser calls (a source-*.c's conf_parse):
 * each error is added to the load's list at the node's position, and
 * loading goes on. what is the key as the error names it ("NAME.api_key").
 */
void			 cfg_error(struct cfgctx *, const struct ynode *, const char *, ...)
			     __attribute__((format(printf, 3, 4)));
/* 1 when n is a mapping without repeated keys; else 0, told. */
int			 cfg_is_map(struct cfgctx *, const struct ynode *, const char *what);
/* A reference (env:NAME, file:PATH), resolved unless the load says not; NULL, told. */
struct secret		*cfg_secret(struct cfgctx *, const struct ynode *, const char *what);
/* An http(s) URL into *out (freed first), without trailing slashes. */
void			 cfg_url(struct cfgctx *, const struct ynode *, const char *what,
			     char **out);
/* A string into *out (freed first). */
void			 cfg_str(struct cfgctx *, const struct ynode *, const char *what, char **out);
/* A whole number from min to max into *out. */
void			 cfg_int(struct cfgctx *, const struct ynode *, const char *what,
			     long long min, long long max, long long *out);
/* A non-empty list of strings, NULL-terminated; NULL, told. */
char			**cfg_argv(struct cfgctx *, const struct ynode *, const char *what);
/* Key i of m is none of keys: told, with the closest one. */
void			 cfg_unknown(struct cfgctx *, const struct ynode *m, size_t i,
			     const char *where, const char *const *keys);

/*
 * A section of secrets and URLs, as a table (terminated by a NULL key): each
 * field's key, kind, place in the section's struct, and default (URLs).
 */
enum cfg_field_kind { CFG_FIELD_SECRET, CFG_FIELD_URL };
struct cfg_field {
	const char		*key;
	enum cfg_field_kind	 kind;
	size_t			 offset;
	const char		*dflt;
};
/*
 * Parses m as the section what into a new struct of size bytes; required: the
 * key that must be there (NULL: none). NULL when m is no mapping (told).
 */
void			*cfg_section(struct cfgctx *, const struct ynode *m, const char *what,
			     const struct cfg_field *, size_t size, const char *required);
/* Frees such a section, its secrets wiped; and passes each secret it has to add. */
void			 cfg_section_free(void *, const struct cfg_field *);
void			 cfg_section_secrets(const void *, const struct cfg_field *,
			     void (*add)(void *, const struct secret *), void *arg);

#endif
