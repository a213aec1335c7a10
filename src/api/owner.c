/* SPDX-License-Identifier: Apache-2.0 */
/* owner.c: the one-thread-per-comm rule, checked on entry to every call on
 * a comm. Two threads in one comm at once would interleave their messages
 * on the same tags: a garbled descriptor check, a hang, or a timeout that
 * blames a live peer. Refusing the second call at once says what happened. */
#include "api/api.h"

coll_status_t coll__comm_enter(coll_comm_t *c, const char *what) {
  const char *running = NULL;
  if (atomic_compare_exchange_strong_explicit(&c->in_call, &running, what,
                                              memory_order_acquire,
                                              memory_order_relaxed))
    return COLL_OK;
  return coll__err(COLL_ERR_INVALID_ARG,
                   "%s: refused: another thread is in %s on this comm (%s); "
                   "a comm takes calls from one thread at a time: give each "
                   "thread a comm of its own, or hand the calls to one thread",
                   what, running, c->name);
}

void coll__comm_leave(coll_comm_t *c) {
  atomic_store_explicit(&c->in_call, NULL, memory_order_release);
}
