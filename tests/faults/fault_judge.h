/* SPDX-License-Identifier: Apache-2.0 */
/* fault_judge.h: what every rank of a fault job must have seen, and the
 * verdict on what it did see: each rank ends within its bound, names the
 * rank where the failure started, and no allreduce ever returned COLL_OK
 * with a wrong sum. */
#ifndef COLL_TESTS_FAULT_JUDGE_H
#define COLL_TESTS_FAULT_JUDGE_H

#include "fault_job.h"

typedef struct fj_expect {
  int all_ok;     /* no failure: every allreduce of every rank right */
  int ok_allowed; /* either that or the failure below (a link no
                     call of the job waits on may be cut) */
  int origins[2]; /* the ranks a failure may be named after */
  int norigins;
  const char *word;        /* what follows "rank N " in the text */
  int status;              /* the survivors' status; 0: any failure */
  const char *victim_word; /* what the victim must say of itself (NULL:
                              anything but COLL_OK, where it lives) */
  int victim_status;       /* the victim's status; 0: any failure */
  int64_t release_ms;      /* from the fault to each waiting rank's return,
                              and the late rank's whole call, at most */
  int64_t not_before_ms;   /* no waiting rank returns sooner after the fault */
} fj_expect_t;

typedef struct fj_verdict {
  int ok;
  char msg[700];
  int judged; /* ranks whose outcome was judged */
  int named;  /* of those, the ones that named the origin */
  int wrong;  /* allreduces that returned COLL_OK with a wrong sum */
  /* From the fault to each waiting rank's return (the late rank: its
   * call), -1 where not judged; the slowest and fastest of them. */
  int64_t release_ms[FJ_MAXW];
  int64_t slowest_ms, fastest_ms;
} fj_verdict_t;

/* The expectation of spec's fault, with generous bounds for a loaded
 * machine (release within 3 s; a stop named no sooner than the heartbeat
 * timeout less a twentieth, and within it plus 3 s). */
void fj_expect_for(const fj_spec_t *s, fj_expect_t *e);
/* Judges res against e. */
void fj_judge(const fj_spec_t *s, const fj_result_t *res, const fj_expect_t *e,
              fj_verdict_t *v);

#endif
