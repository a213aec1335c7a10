/* SPDX-License-Identifier: Apache-2.0 */
/* store_map.h: the store server's key table. An entry exists while it holds
 * a value or while some connection waits for it; waiters hang off the entry
 * they wait for, so a set wakes only the connections that care about it.
 * Loop thread only (the server's thread owns the table). */
#ifndef COLL_BOOTSTRAP_STORE_MAP_H
#define COLL_BOOTSTRAP_STORE_MAP_H

#include <stddef.h>
#include <stdint.h>

/* An intrusive doubly linked list node; a list head is a node too. */
typedef struct coll_smap_link {
  struct coll_smap_link *prev, *next;
} coll_smap_link_t;

typedef struct coll_smap_entry {
  struct coll_smap_entry *chain; /* next entry in the same bucket */
  uint64_t hash;
  uint8_t *val; /* malloc'd; NULL while has_val == 0 */
  size_t vlen;
  int has_val;
  coll_smap_link_t waiters; /* connections waiting for this key */
  size_t klen;
  char key[]; /* klen bytes and a NUL */
} coll_smap_entry_t;

typedef struct coll_smap {
  coll_smap_entry_t **buckets;
  size_t nbuckets; /* a power of two */
  size_t count;
  size_t bytes; /* what the entries cost: coll__smap_cost of each */
} coll_smap_t;

/* What an entry with a klen-byte key and a vlen-byte value counts against
 * the store's byte cap: its key and value, and a fixed charge for the
 * entry itself, so that many empty values cannot escape the cap. */
#define COLL_SMAP_ENTRY_CHARGE 64u
static inline size_t coll__smap_cost(size_t klen, size_t vlen) {
  return COLL_SMAP_ENTRY_CHARGE + klen + vlen;
}

void coll__smap_init(coll_smap_t *m);
void coll__smap_free(coll_smap_t *m);
coll_smap_entry_t *coll__smap_find(const coll_smap_t *m, const char *key,
                                   size_t klen);
/* The entry for key, created without a value if absent; NULL when out of
 * memory. */
coll_smap_entry_t *coll__smap_get_or_add(coll_smap_t *m, const char *key,
                                         size_t klen);
/* Replaces the value (copied); 0 on success, -1 when out of memory (the old
 * value is kept). */
int coll__smap_set(coll_smap_t *m, coll_smap_entry_t *e, const void *val,
                   size_t len);
/* Drops an entry that neither holds a value nor has waiters. */
void coll__smap_release(coll_smap_t *m, coll_smap_entry_t *e);

static inline void coll__smap_link_init(coll_smap_link_t *l) {
  l->prev = l->next = l;
}
static inline int coll__smap_link_empty(const coll_smap_link_t *l) {
  return l->next == l;
}
static inline void coll__smap_link_push(coll_smap_link_t *head,
                                        coll_smap_link_t *l) {
  l->prev = head->prev;
  l->next = head;
  head->prev->next = l;
  head->prev = l;
}
static inline void coll__smap_link_remove(coll_smap_link_t *l) {
  l->prev->next = l->next;
  l->next->prev = l->prev;
  coll__smap_link_init(l);
}

#endif
