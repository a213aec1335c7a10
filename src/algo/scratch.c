/* SPDX-License-Identifier: Apache-2.0 */
/* scratch.c: a per-comm scratch area, grown on demand and reused. */
#include <stdint.h>
#include <stdlib.h>

#include "algo/algo.h"
#include "core/error.h"

#define SCRATCH_ALIGN 64u

void *coll__scratch_get(coll_scratch_t *s, size_t bytes) {
  size_t cap;
  void *p;
  if (s->ptr != NULL && bytes <= s->cap) return s->ptr;
  if (bytes > SIZE_MAX - (SCRATCH_ALIGN - 1)) {
    coll__err(COLL_ERR_NO_MEMORY, "scratch: %zu bytes is too large", bytes);
    return NULL;
  }
  /* aligned_alloc wants a multiple of the alignment; 0 bytes still get a
   * usable pointer so that callers need no special case. */
  cap = (bytes + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
  if (cap == 0) cap = SCRATCH_ALIGN;
  /* The old contents are not kept, so free first: a smaller peak. */
  free(s->ptr);
  s->ptr = NULL;
  s->cap = 0;
  p = aligned_alloc(SCRATCH_ALIGN, cap);
  if (p == NULL) {
    coll__err(COLL_ERR_NO_MEMORY, "scratch: out of memory for %zu bytes", cap);
    return NULL;
  }
  s->ptr = p;
  s->cap = cap;
  return p;
}

void coll__scratch_free(coll_scratch_t *s) {
  free(s->ptr);
  s->ptr = NULL;
  s->cap = 0;
}
