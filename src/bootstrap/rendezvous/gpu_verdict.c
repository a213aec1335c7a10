/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_verdict.c: whether every rank has a GPU of its own (gpu_verdict.h). */
#include "bootstrap/rendezvous/gpu_verdict.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* qsort has no context argument; the ranks being sorted are this thread's
 * and only for the length of one sort. */
static _Thread_local const coll_gpu_rank_t *sorting;

static int by_host_gpu_rank(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb, c;
  if (sorting[a].host != sorting[b].host)
    return sorting[a].host < sorting[b].host ? -1 : 1;
  c = strcmp(sorting[a].gpu, sorting[b].gpu);
  if (c != 0) return c;
  return a < b ? -1 : a > b;
}

void coll__gpus_judge(const coll_gpu_rank_t *ranks, int world, int *order,
                      coll_gpus_t *out) {
  int q;
  memset(out, 0, sizeof *out);
  out->kind = COLL_GPUS_OWN;
  out->rank_a = out->rank_b = -1;
  for (q = 0; q < world; q++)
    if (ranks[q].gpu[0] == '\0') {
      out->kind = COLL_GPUS_MISSING;
      out->rank_a = q;
      return;
    }
  /* Sorted by host, then GPU, then rank: two ranks of a host on one GPU
   * are neighbours, the lower rank first. n log n, for the largest jobs. */
  for (q = 0; q < world; q++) order[q] = q;
  sorting = ranks;
  qsort(order, (size_t)world, sizeof *order, by_host_gpu_rank);
  sorting = NULL;
  for (q = 1; q < world; q++) {
    const coll_gpu_rank_t *x = &ranks[order[q - 1]], *y = &ranks[order[q]];
    if (x->host == y->host && strcmp(x->gpu, y->gpu) == 0) {
      out->kind = COLL_GPUS_SHARED;
      out->rank_a = order[q - 1];
      out->rank_b = order[q];
      snprintf(out->gpu, sizeof out->gpu, "%s", x->gpu);
      return;
    }
  }
}

void coll__gpus_text(const coll_gpus_t *v, char *out, size_t cap) {
  switch (v->kind) {
    case COLL_GPUS_MISSING: snprintf(out, cap, "missing %d", v->rank_a); break;
    case COLL_GPUS_SHARED:
      snprintf(out, cap, "shared %d %d %s", v->rank_a, v->rank_b, v->gpu);
      break;
    default: snprintf(out, cap, "own"); break;
  }
}

int coll__gpus_parse(const char *text, coll_gpus_t *out) {
  char gpu[COLL_GPU_ID_MAX];
  int a = -1, b = -1;
  memset(out, 0, sizeof *out);
  out->rank_a = out->rank_b = -1;
  if (strcmp(text, "own") == 0) {
    out->kind = COLL_GPUS_OWN;
    return 0;
  }
  if (sscanf(text, "missing %d", &a) == 1 && a >= 0) {
    out->kind = COLL_GPUS_MISSING;
    out->rank_a = a;
    return 0;
  }
  if (sscanf(text, "shared %d %d %39s", &a, &b, gpu) == 3 && a >= 0 && b >= 0) {
    out->kind = COLL_GPUS_SHARED;
    out->rank_a = a;
    out->rank_b = b;
    snprintf(out->gpu, sizeof out->gpu, "%s", gpu);
    return 0;
  }
  return -1;
}

void coll__gpu_word(const char *id, char out[COLL_GPU_ID_MAX]) {
  size_t n = 0;
  for (; *id != '\0' && n < COLL_GPU_ID_MAX - 1; id++)
    if (!isspace((unsigned char)*id))
      out[n++] = (char)tolower((unsigned char)*id);
  out[n] = '\0';
}
