/* SPDX-License-Identifier: Apache-2.0 */
/* match.h: matching messages to receives by (peer, tag), oldest first, as
 * the public contract orders them (coll_transport.h: two messages from one
 * peer with one tag match their receives in posting order). Every provider
 * keeps two queues of this kind: receives posted and not yet matched, and
 * messages that arrived (or are arriving) before their receive. A queue
 * holds items embedded in the provider's own records (a request, an early
 * message); the provider finds its record again with COLL_MATCH_OWNER.
 * A provider whose queues are per peer passes that peer throughout.
 *
 * No locking: the provider holds whatever lock guards the queue. Written
 * inline so that the provider's filter (a request being copied, a message
 * that already has its receive) costs no call on the message path. */
#ifndef COLL_TRANSPORT_COMMON_MATCH_H
#define COLL_TRANSPORT_COMMON_MATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct coll_match_item {
  struct coll_match_item *prev, *next;
  int peer;     /* the sending rank */
  uint32_t tag; /* the message's tag */
} coll_match_item_t;

typedef struct coll_match_q {
  coll_match_item_t *head, *tail;
} coll_match_q_t;

/* The record of `type` whose `member` is the item at ptr. */
#define COLL_MATCH_OWNER(ptr, type, member) \
  ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline void coll__match_q_init(coll_match_q_t *q) {
  q->head = q->tail = NULL;
}

static inline int coll__match_q_empty(const coll_match_q_t *q) {
  return q->head == NULL;
}

/* Appends it, keyed (peer, tag), at the young end of q. */
static inline void coll__match_push(coll_match_q_t *q, coll_match_item_t *it,
                                    int peer, uint32_t tag) {
  it->peer = peer;
  it->tag = tag;
  it->next = NULL;
  it->prev = q->tail;
  if (q->tail != NULL)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
}

/* Takes it, which is in q, out of q. */
static inline void coll__match_remove(coll_match_q_t *q,
                                      coll_match_item_t *it) {
  if (it->prev != NULL)
    it->prev->next = it->next;
  else
    q->head = it->next;
  if (it->next != NULL)
    it->next->prev = it->prev;
  else
    q->tail = it->prev;
  it->prev = it->next = NULL;
}

/* The oldest item of q keyed (peer, tag) that `free_to_match` accepts
 * (NULL: every item), left in q; NULL if none. */
static inline coll_match_item_t *coll__match_find(
    const coll_match_q_t *q, int peer, uint32_t tag,
    int (*free_to_match)(const coll_match_item_t *)) {
  coll_match_item_t *it;
  for (it = q->head; it != NULL; it = it->next)
    if (it->tag == tag && it->peer == peer &&
        (free_to_match == NULL || free_to_match(it)))
      return it;
  return NULL;
}

/* The oldest item of q keyed (peer, tag), taken out of q; NULL if none. */
static inline coll_match_item_t *coll__match_take(coll_match_q_t *q, int peer,
                                                  uint32_t tag) {
  coll_match_item_t *it = coll__match_find(q, peer, tag, NULL);
  if (it != NULL) coll__match_remove(q, it);
  return it;
}

#endif
