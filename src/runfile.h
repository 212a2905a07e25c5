/* runfile.h: what a run leaves for people to fetch (its change, its artifacts), kept where any node serves it. */
#ifndef SPUR_RUNFILE_H
#define SPUR_RUNFILE_H

#include <stddef.h>

struct engine;

/* The agent's /artifacts, packed (archive.c), and why none was kept when none was. */
#define RUNFILE_ARTIFACTS	"artifacts.spurarc"
#define RUNFILE_ARTIFACTS_NOTE	"artifacts.note"

/*
 * Keeps name's bytes for the run: in the store when several nodes share it
 * (any node serves them, after this one died too), else in data_dir/runs/RUN
 * (0640: the spur group's CLI reads it). 0, or -1 with the reason.
 */
int	runfile_keep(struct engine *, const char *run, const char *name, const void *, size_t,
	    char **cause);
/* Reads it back whole (NUL-terminated, to free): 0; 1: none kept (or over max); -1: failed. */
int	runfile_read(struct engine *, const char *run, const char *name, size_t max,
	    char **data, size_t *len);

#endif
