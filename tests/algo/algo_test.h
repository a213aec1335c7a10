/* SPDX-License-Identifier: Apache-2.0 */
/* algo_test.h: running the CPU algorithms on N rank threads over a chosen
 * transport, and the test's own data and reference results.
 *
 * Data is integer-valued so that every float sum, product, max and min of
 * it is exact and a result can be compared bit for bit with a reference
 * combined in int64; a second kind is random floats, checked for identical
 * bits on every rank and against an f64 reference within a tolerance. */
#ifndef COLL_TEST_ALGO_TEST_H
#define COLL_TEST_ALGO_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "algo/algo.h"
#include "coll.h"
#include "mailbox.h"

#define AT_MAXW 8

typedef enum at_tp {
  AT_INPROC = 0, /* the library's in-process transport */
  AT_MBOX_RDV,   /* mailbox, sends complete only when received */
  AT_MBOX_EAGER, /* mailbox, sends complete at once */
  AT_NTP
} at_tp_t;

const char *at_tp_name(at_tp_t tp);

typedef struct at_world {
  int n;
  at_tp_t tp;
  coll_transport_t *t[AT_MAXW];
  mbox_world_t *mb;
  coll_scratch_t scratch[AT_MAXW];
} at_world_t;

/* 1 when the matrices should shrink: TEST_QUICK=1, or a sanitizer build
 * (TEST_QUICK=0 forces the full matrices). */
int at_quick(void);

/* Whether the quick matrix runs world n over transport tp: the in-process
 * transport and the rendezvous mailbox at every size, the eager one at a
 * few. */
int at_world_wanted(at_tp_t tp, int n);

/* Opens n endpoints of transport tp. Returns 0 on success. */
int at_open(at_world_t *w, int n, at_tp_t tp);
/* Destroys the endpoints and scratch; returns the number of requests the
 * algorithms left unwaited (mailbox transports; 0 for inproc). */
size_t at_close(at_world_t *w);
/* A context for `rank`: deadline timeout_ms from now. */
void at_ctx(at_world_t *w, int rank, uint32_t seq, size_t seg_bytes,
            int64_t timeout_ms, coll_algo_ctx_t *ctx);

/* What a case runs. */
typedef enum at_kind {
  AT_AR_RING,
  AT_AR_RD,
  AT_AR_RH,
  AT_RS,
  AT_AG,
  AT_BCAST,
  AT_REDUCE,
  AT_BARRIER,
  AT_AR_RING_BOUNDED /* the ring with rounds bounded in bytes */
} at_kind_t;

const char *at_kind_name(at_kind_t k);

typedef struct at_case {
  at_kind_t kind;
  size_t count; /* elements (per block for RS and AG) */
  coll_dtype_t dt;
  coll_op_t op;
  size_t seg;
  int root;
  int random;     /* random floats instead of exact integers */
  size_t seg_max; /* the context's seg_max_bytes (0: seg at every size) */
} at_case_t;

/* Per rank and case: the outcome. */
typedef struct at_out {
  int status;
  size_t nbad; /* elements that differ from the reference */
  size_t first_bad;
  uint64_t hash; /* of the result, to compare ranks bit for bit */
  char err[200];
} at_out_t;

/* Runs every case on every rank of w (a hang fails the test with a
 * message), in order, one sequence number each, and fills out[case * n +
 * rank]. */
void at_run_cases(at_world_t *w, const at_case_t *cases, size_t ncases,
                  at_out_t *out, int64_t timeout_ms);

/* Runs case c's algorithm on buf (sized for the case) with ctx. */
coll_status_t at_call(const at_case_t *c, const coll_algo_ctx_t *ctx,
                      void *buf);

/* Checks the outcomes: every status OK, no bad element, and identical
 * result bits on every rank where the collective promises it. Prints the
 * first problems; returns how many cases failed. */
size_t at_report(const at_world_t *w, const at_case_t *cases, size_t ncases,
                 const at_out_t *out);

/* Opens a world of n ranks over transport tp, runs the nc cases, reports
 * every wrong result and every request never waited, closes it. Returns the
 * number of failures (0: all good; a world that cannot open counts one). */
size_t at_run_world(at_tp_t tp, int n, const at_case_t *cs, size_t nc);

/* Data helpers (also used by the other test files). */
int64_t at_value(coll_dtype_t dt, coll_op_t op, int rank, uint64_t salt,
                 size_t i);
void at_encode(coll_dtype_t dt, double v, void *elem);
double at_decode(coll_dtype_t dt, const void *elem);
uint64_t at_hash(const void *p, size_t bytes);
/* 1 when (dt, op) has a kernel and the case generator should use it. */
int at_has_kernel(coll_dtype_t dt, coll_op_t op);

#endif
