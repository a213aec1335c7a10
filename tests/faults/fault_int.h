/* SPDX-License-Identifier: Apache-2.0 */
/* fault_int.h: what the parent of a fault job (fault_job.c), its rank
 * processes (fault_rank.c) and its helper (fault_helper.c) share: one
 * region mapped before they fork. */
#ifndef COLL_TESTS_FAULT_INT_H
#define COLL_TESTS_FAULT_INT_H

#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "fault_job.h"

/* What a rank's watchdog thread is told to do. */
enum { FJ_CMD_NONE = 0, FJ_CMD_ABORT, FJ_CMD_GARBAGE, FJ_CMD_QUIT };
/* What the helper is told to do. */
enum {
  FJ_HELP_NONE = 0,
  FJ_HELP_TARGET,    /* point the proxy at `target` */
  FJ_HELP_CORRUPT,   /* corrupt the next frame header in direction `dir` */
  FJ_HELP_BLACKHOLE, /* stall both directions */
  FJ_HELP_QUIT,
};

typedef struct fj_shared {
  fj_spec_t spec;
  int port;            /* the store's */
  char proxy_addr[96]; /* the proxy's, for rank proxy_hi */
  /* Per rank. reached: the last allreduce it entered (1-based). */
  atomic_int up[FJ_MAXW], reached[FJ_MAXW], done[FJ_MAXW];
  atomic_int cmd[FJ_MAXW];
  sem_t cmd_sem[FJ_MAXW];
  atomic_int release;     /* the late rank may enter */
  atomic_int stream_stop; /* the stream's ranks may agree to end it */
  atomic_int end;         /* every rank may destroy its comm and exit */
  /* The helper: one command at a time, acknowledged. */
  atomic_int help_cmd, help_dir, help_rc, help_ready;
  char target[96];
  sem_t help_sem, help_ack, help_lock;
  fj_rank_out_t out[FJ_MAXW];
} fj_shared_t;

/* A rank process's body (fault_rank.c): its exit code. */
int fj_rank_main(fj_shared_t *sh, int rank);
/* The helper process's body (fault_helper.c): serves the store and the
 * proxy until told to quit. */
int fj_helper_main(fj_shared_t *sh);
/* Sends the helper one command and waits (bounded) for its answer: 0, or
 * -1 when it failed or did not answer. Any process of the job. */
int fj_helper_call(fj_shared_t *sh, int cmd, int dir, const char *target);

int64_t fj_now_ms(void);
void fj_sleep_ms(int64_t ms);

#endif
