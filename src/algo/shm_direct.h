/* SPDX-License-Identifier: Apache-2.0 */
/* shm_direct.h: the direct mode of the collectives designed for shared
 * memory: a rank takes what it needs from its peers' own buffers instead
 * of through the slots. Two transports offer it: threads of one process
 * address each other's memory (the rounds' direct_from, read_begin,
 * read_end: the in-process transport), and processes of one host copy
 * from each other's memory once, through the kernel (the provider's
 * peer_read, from coll__t_copy_from bytes: the shared-memory transport).
 *
 * The protocol is the rounds' (shm_round.h), one round per call: every
 * rank publishes where its buffers are in its note and posts IN; after
 * every rank's IN it reads what it needs from its peers' buffers; it
 * returns only once every rank posted OUT, since until then a peer may
 * still read its buffers. A rank only reads from its peers, never writes
 * into them. One thread per run. */
#ifndef COLL_ALGO_SHM_DIRECT_H
#define COLL_ALGO_SHM_DIRECT_H

#include <stddef.h>

#include "algo/shm_round.h"

/* Where a note holds the published addresses: after the descriptor check's
 * bytes (allreduce_shm.c), two of them. */
#define SHM_DIRECT_NOTE_PTRS 48
_Static_assert(SHM_DIRECT_NOTE_PTRS + 2 * sizeof(void *) <= COLL_T_NOTE_BYTES,
               "the direct mode's addresses fit the note");

/* 1 if a call whose largest buffer per rank is `bytes` copies from the
 * peers' buffers once through the kernel (processes of one host). The
 * same answer on every rank for the same arguments. */
static inline int coll__shm_direct_copies(const shm_run_t *S, size_t bytes) {
  size_t from = coll__t_copy_from(S->run.ctx->t);
  return S->world > 1 && from > 0 && bytes >= from;
}

/* Writes this rank's two addresses into its note of the current round. */
void coll__shm_direct_publish(shm_run_t *S, const void *a, const void *b);
/* Rank r's address k (0 or 1) from its note of the current round. */
char *coll__shm_direct_ptr(const shm_run_t *S, int r, int k);
/* Copies len bytes at `from` in rank r's memory into dst (r may be this
 * rank: a memcpy); a failure fails the run (and the transport) with `what`
 * as context. */
coll_status_t coll__shm_direct_read(shm_run_t *S, int r, void *dst,
                                    const void *from, size_t len,
                                    const char *what);

#endif
