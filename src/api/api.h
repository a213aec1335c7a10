/* SPDX-License-Identifier: Apache-2.0 */
/* api.h: argument checks shared by the public entry points, the check of
 * one thread per comm, and issuing checked work into a comm's backend. */
#ifndef COLL_API_API_H
#define COLL_API_API_H

#include "core/comm.h"

/* Each returns COLL_OK or COLL_ERR_INVALID_ARG/UNSUPPORTED with a sentence
 * that starts with `what` ("allreduce: ..."). */
coll_status_t coll__check_comm(const char *what, const coll_comm_t *c);
coll_status_t coll__check_dtype(const char *what, coll_dtype_t dt);
coll_status_t coll__check_op(const char *what, coll_op_t op);
/* count elements of dt (times `blocks`) must fit in size_t bytes. */
coll_status_t coll__check_count(const char *what, size_t count, size_t blocks,
                                coll_dtype_t dt);
/* The checks every typed collective starts with: comm, dtype, op (when
 * with_op), and count * blocks elements fitting in memory (blocks 0: one
 * block per rank of the comm). */
coll_status_t coll__check_typed(const char *what, const coll_comm_t *c,
                                coll_dtype_t dt, int with_op, coll_op_t op,
                                size_t count, size_t blocks);
/* p may be NULL only when bytes == 0; asks the backend about its memory. */
coll_status_t coll__check_buf(const char *what, const coll_comm_t *c,
                              const char *name, const void *p, size_t bytes);
coll_status_t coll__check_rank(const char *what, const coll_comm_t *c,
                               const char *name, int r);
/* send and recv must be the same pointer or not overlap at all. */
coll_status_t coll__check_overlap(const char *what, const void *send,
                                  size_t send_bytes, const void *recv,
                                  size_t recv_bytes);

/* An i-form's request pointer: NULL is refused; otherwise *req is set to
 * NULL, which it reads until a request was issued, so a call that fails
 * leaves none. (The blocking forms pass NULL to the shared body, which
 * coll__issue takes as "wait for the result".) */
coll_status_t coll__check_req(const char *what, coll_request_t **req);

/* The buffers of a batch: valid dtypes, counts and pointers, a total that
 * fits in memory, and no two sharing a byte (each is reduced in place). */
coll_status_t coll__check_batch(const char *what, const coll_comm_t *c,
                                const coll_buffer_t *bufs, size_t nbufs);

/* One thread per comm (coll.h, "Threads"), checked: claims c for the call
 * `what` (a string literal) until coll__comm_leave. While another call is in
 * progress on c (another thread's: one thread is in one call at a time) this
 * one is refused with COLL_ERR_INVALID_ARG naming both, before anything is
 * issued, so the running call goes on untouched. One compare-and-swap and
 * one store per call, on a line only the calling thread writes. */
coll_status_t coll__comm_enter(coll_comm_t *c, const char *what);
void coll__comm_leave(coll_comm_t *c);

/* Submits w under the abort handle's issue guard. req == NULL: blocking,
 * waits and returns the result. Never holds the guard across a wait.
 * Records w in the comm's flight recorder, if any (sets w->trace_seq). */
coll_status_t coll__issue(coll_comm_t *c, coll_work_t *w, coll_request_t **req);

#endif
