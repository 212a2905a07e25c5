/* cfg.h: what config.c and cfg.c share: a load's context, and the leaf parsers conf.h leaves out. */
#ifndef SPUR_CFG_H
#define SPUR_CFG_H

struct yerrs;
struct ynode;

/* What a walker needs to report an error: the file and where errors go. */
struct cfgctx {
	const char	*file;
	const char	*dir;
	int		 flags;		/* CONFIG_* */
	struct yerrs	*errs;
};

/* What may be intended but most likely is not: told, never refused. */
void		 cfg_warn(struct cfgctx *, const struct ynode *, const char *, ...)
		     __attribute__((format(printf, 3, 4)));
/* A scalar's text, NULL (told) when n is none. */
const char	*cfg_scalar(struct cfgctx *, const struct ynode *, const char *what);

#endif
