/* SPDX-License-Identifier: Apache-2.0 */
/* shm_test.h: running the shared-memory transport's ranks as forked
 * processes that meet through files in a temp directory, with their
 * results in memory the test process reads after they exit, and a check
 * that nothing new appeared in /dev/shm. */
#ifndef COLL_TESTS_SHM_TEST_H
#define COLL_TESTS_SHM_TEST_H

#include "transport_test.h"

/* Bound of every group of rank processes; a hang past it is a failure. */
#define SHM_RUN_MS 60000

/* One rank's body; it records failures in *res (never cmocka asserts). */
typedef void (*shm_rank_fn)(coll_transport_t *t, int rank, int world,
                            tt_result_t *res, void *arg);

/* Forks `world` rank processes; each builds its endpoint, runs fn and
 * destroys it. Returns 0 when every rank exited 0 within SHM_RUN_MS (ranks
 * that hang are killed, and a message says so); res[] holds each rank's
 * record, status[] (may be NULL) each exit status (2: its endpoint could
 * not be made; 1: fn recorded a failure; 128+signal if killed).
 * `setup` (may be NULL) runs in each child before its endpoint is made. */
int shm_run(int world, shm_rank_fn fn, void *arg, tt_result_t *res, int *status,
            void (*setup)(int rank));

/* Per-rank overrides of the endpoint options, for setup failures: a job
 * id (NULL: "shm-test") and the bound on meeting the peers (0: TT_WAIT_MS).
 * Set them before shm_run; the children inherit them. */
extern const char *shm_test_job_id[TT_MAX_RANKS];
/* Set: the rank function takes the endpoint over (it makes a comm of it,
 * whose destroy ends it), so the child does not destroy it. */
extern int shm_test_fn_owns_transport;
extern int64_t shm_test_setup_ms;
/* Set (non-NULL): the ranks are the members of a host endpoint, rank i
 * named shm_test_names[i] in a comm of shm_test_name_world ranks (shm.h);
 * fn still gets the member index and count. */
extern const int *shm_test_names;
extern int shm_test_name_world;

/* The names in /dev/shm (a snapshot, newline-separated, malloc'd) and the
 * first name in `after` absent from `before` (Open MPI's own segments,
 * which tests running beside these may make, aside), or NULL. */
char *shm_devshm_list(void);
const char *shm_devshm_new(const char *before, const char *after);

#endif
