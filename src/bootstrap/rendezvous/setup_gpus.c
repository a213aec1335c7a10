/* SPDX-License-Identifier: Apache-2.0 */
/* setup_gpus.c: the GPU comparison of COLL_BACKEND=auto through a caller's
 * store (coll_comm_init_store), where no rank 0 judges: each rank that
 * asks publishes "gpus/<rank>" (its host and GPU) before its compatibility
 * record; once the compatibility check has seen every rank's record,
 * every "gpus/<r>" that will ever be written is there, so each rank reads
 * them without waiting and judges (gpu_verdict.h). Every rank reads the
 * same records and reaches the same verdict. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/gpu_verdict.h"
#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/kv.h"
#include "bootstrap/rendezvous/setup_check.h"
#include "core/error.h"

#define GPUS_RECORD_MAX (COLL_HOST_ID_MAX + COLL_GPU_ID_MAX + 2)

coll_status_t coll__setup_gpus_publish(const coll_setup_t *su,
                                       const char *gpu) {
  char key[COLL_KV_KEY_MAX], host[COLL_HOST_ID_MAX], word[COLL_GPU_ID_MAX];
  char record[GPUS_RECORD_MAX];
  snprintf(key, sizeof key, "%sgpus/%d", su->prefix, su->rank);
  coll__host_id_of_rank(su->rank, host);
  coll__gpu_word(gpu, word);
  snprintf(record, sizeof record, "%s %s", host, word);
  return coll__kv_set(su->ops, key, record, strlen(record));
}

/* Rank q's record into *g (a rank without one names no GPU). */
static coll_status_t read_gpu(const coll_setup_t *su, int q,
                              coll_host_table_t *tab, coll_gpu_rank_t *g) {
  char key[COLL_KV_KEY_MAX], record[GPUS_RECORD_MAX], *sp;
  size_t len = 0;
  coll_status_t s;
  snprintf(key, sizeof key, "%sgpus/%d", su->prefix, q);
  s = coll__kv_get(su->ops, key, record, sizeof record - 1, &len, 0);
  if (s == COLL_ERR_TIMEOUT || s == COLL_ERR_LENGTH_MISMATCH ||
      (s == COLL_OK && len > sizeof record - 1)) {
    coll__err_clear();
    g->host = -1 - q;
    return COLL_OK;
  }
  if (s != COLL_OK) return s;
  record[len] = '\0';
  sp = strrchr(record, ' ');
  if (sp != NULL) {
    *sp = '\0';
    coll__gpu_word(sp + 1, g->gpu);
  }
  g->host = coll__host_table_index(tab, record);
  return g->host < 0 ? COLL_ERR_NO_MEMORY : COLL_OK;
}

coll_status_t coll__setup_gpus_judge(const coll_setup_t *su, coll_gpus_t *out) {
  coll_gpu_rank_t *gpus = calloc((size_t)su->world, sizeof *gpus);
  int *order = malloc((size_t)su->world * sizeof *order), q;
  coll_host_table_t tab = {NULL, 0, 0};
  coll_status_t s = COLL_OK;
  if (gpus == NULL || order == NULL) {
    s = coll__err(COLL_ERR_NO_MEMORY, "setup: out of memory");
    goto out;
  }
  for (q = 0; q < su->world && s == COLL_OK; q++)
    s = read_gpu(su, q, &tab, &gpus[q]);
  if (s == COLL_OK) coll__gpus_judge(gpus, su->world, order, out);
out:
  coll__host_table_free(&tab);
  free(gpus);
  free(order);
  return s;
}
