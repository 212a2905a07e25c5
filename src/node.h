/* node.h: this engine among several on one store (SPEC section 17): its lease, dead nodes' runs, the config hash. */
#ifndef SPUR_NODE_H
#define SPUR_NODE_H

#include <jansson.h>
#include <stdint.h>

struct engine;
struct node;
struct buf;

/* nodes.lease and nodes.beat by default (node.c derives its other waits from the lease). */
#define NODE_LEASE_MS	20000
#define NODE_BEAT_MS	5000

/*
 * This node, named afresh at each start. On a shared store (PostgreSQL) it
 * takes its lease (nodes.lease) now and renews it every nodes.beat; on
 * sqlite it only names the node its runs run on. Both are the ones it
 * started with until it stops: a reload does not change them.
 */
struct node	*node_create(struct engine *, char **cause);
void		 node_free(struct node *);
const char	*node_id(const struct node *);
/* 0 once the node may not start runs: its lease lapsed, or could not be renewed in time. */
int		 node_may_work(const struct node *);
/* 1 when the node stopped because its lease lapsed (spur serve then exits 1). */
int		 node_fenced(const struct node *);
/*
 * The runs the engine must end as interrupted at start: on sqlite every
 * running one (the engine died); on a shared store those of the node that
 * last ran on this data_dir, now declared dead (the others are live nodes').
 * Their ids, NULL-terminated (strv_free); NULL: none.
 */
char		**node_orphans(struct node *);
/*
 * When no store command may wait past (ms): the last renewal of the lease and
 * the time it leaves (store_horizon); 0 on one node. The writer's connection
 * is held to it from its start (writer_horizon), and again at each beat.
 */
int64_t		 node_horizon(const struct node *);
/* The config was reloaded: its hash is told with the next beat. */
void		 node_reload(struct node *);
/* /metrics: the nodes' lease and config gauges. */
void		 node_metrics(const struct node *, struct buf *);

#endif
