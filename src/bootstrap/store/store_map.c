/* SPDX-License-Identifier: Apache-2.0 */
/* store_map.c: a chained hash table of store keys (FNV-1a, doubling). */
#include "bootstrap/store/store_map.h"

#include <stdlib.h>
#include <string.h>

#define SMAP_MIN_BUCKETS 64u

static uint64_t smap_hash(const char *key, size_t klen) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i;
  for (i = 0; i < klen; i++) {
    h ^= (uint8_t)key[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void coll__smap_init(coll_smap_t *m) {
  m->buckets = NULL;
  m->nbuckets = 0;
  m->count = 0;
  m->bytes = 0;
}

void coll__smap_free(coll_smap_t *m) {
  size_t i;
  for (i = 0; i < m->nbuckets; i++) {
    coll_smap_entry_t *e = m->buckets[i];
    while (e != NULL) {
      coll_smap_entry_t *next = e->chain;
      free(e->val);
      free(e);
      e = next;
    }
  }
  free(m->buckets);
  coll__smap_init(m);
}

coll_smap_entry_t *coll__smap_find(const coll_smap_t *m, const char *key,
                                   size_t klen) {
  uint64_t h;
  coll_smap_entry_t *e;
  if (m->nbuckets == 0) return NULL;
  h = smap_hash(key, klen);
  for (e = m->buckets[h & (m->nbuckets - 1)]; e != NULL; e = e->chain)
    if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
      return e;
  return NULL;
}

/* Doubles the bucket array; on allocation failure the table just stays
 * denser, which is slower but still correct. */
static void smap_grow(coll_smap_t *m) {
  size_t n = m->nbuckets ? m->nbuckets * 2 : SMAP_MIN_BUCKETS, i;
  coll_smap_entry_t **b = calloc(n, sizeof *b);
  if (b == NULL) return;
  for (i = 0; i < m->nbuckets; i++) {
    coll_smap_entry_t *e = m->buckets[i];
    while (e != NULL) {
      coll_smap_entry_t *next = e->chain;
      e->chain = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
      e = next;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->nbuckets = n;
}

coll_smap_entry_t *coll__smap_get_or_add(coll_smap_t *m, const char *key,
                                         size_t klen) {
  coll_smap_entry_t *e = coll__smap_find(m, key, klen);
  size_t slot;
  if (e != NULL) return e;
  if (m->count >= m->nbuckets) smap_grow(m);
  if (m->nbuckets == 0) return NULL;
  e = calloc(1, sizeof *e + klen + 1);
  if (e == NULL) return NULL;
  e->hash = smap_hash(key, klen);
  e->klen = klen;
  memcpy(e->key, key, klen);
  e->key[klen] = '\0';
  coll__smap_link_init(&e->waiters);
  slot = e->hash & (m->nbuckets - 1);
  e->chain = m->buckets[slot];
  m->buckets[slot] = e;
  m->count++;
  m->bytes += coll__smap_cost(klen, 0);
  return e;
}

int coll__smap_set(coll_smap_t *m, coll_smap_entry_t *e, const void *val,
                   size_t len) {
  /* malloc(0) may return NULL; keep one byte so "empty value" is distinct
   * from "out of memory". */
  uint8_t *v = malloc(len > 0 ? len : 1);
  if (v == NULL) return -1;
  if (len > 0) memcpy(v, val, len);
  free(e->val);
  m->bytes = m->bytes - e->vlen + len;
  e->val = v;
  e->vlen = len;
  e->has_val = 1;
  return 0;
}

void coll__smap_release(coll_smap_t *m, coll_smap_entry_t *e) {
  coll_smap_entry_t **pp;
  if (e->has_val || !coll__smap_link_empty(&e->waiters)) return;
  for (pp = &m->buckets[e->hash & (m->nbuckets - 1)]; *pp != NULL;
       pp = &(*pp)->chain) {
    if (*pp == e) {
      *pp = e->chain;
      m->count--;
      m->bytes -= coll__smap_cost(e->klen, e->vlen);
      free(e->val);
      free(e);
      return;
    }
  }
}
