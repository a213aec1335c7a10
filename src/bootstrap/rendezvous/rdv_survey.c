/* SPDX-License-Identifier: Apache-2.0 */
/* rdv_survey.c: rank 0's one pass over what every rank published before it
 * joined ("host/<r>": its mode, host and, under COLL_BACKEND=auto, the GPU
 * it would run NCCL on): the hosts counted, for the warning about a job
 * across hosts without a token, and the GPUs judged (gpu_verdict.h), so
 * that every rank learns from rank 0's verdict whether NCCL can run, at
 * the cost of no round trip of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/rendezvous/gpu_verdict.h"
#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/rendezvous/rdv_int.h"
#include "core/error.h"

/* Where a rank's record cannot be read or judged, NCCL is not risked: the
 * verdict names rank q as missing a GPU. */
static void missing(coll_rdv_t *r, int q) {
  memset(&r->gpus, 0, sizeof r->gpus);
  r->gpus.kind = COLL_GPUS_MISSING;
  r->gpus.rank_a = q;
  r->gpus.rank_b = -1;
}

int coll__rdv_survey(coll_rdv_t *r) {
  char key[COLL_RDV_KEY_MAX], info[COLL_HOST_INFO_MAX], why[COLL_ERRMSG_MAX];
  coll_host_table_t tab = {NULL, 0, 0};
  coll_gpu_rank_t *gpus = NULL;
  int *order = NULL, q, hosts;
  coll__err_save(why);
  missing(r, 0);
  if (r->gpu_named) {
    gpus = calloc((size_t)r->world, sizeof *gpus);
    order = malloc((size_t)r->world * sizeof *order);
    if (gpus == NULL || order == NULL) { /* judged missing: CPU ring */
      free(gpus);
      free(order);
      gpus = NULL;
      order = NULL;
    }
  }
  for (q = 0; q < r->world; q++) {
    size_t len = 0;
    char *host, *gpu;
    int h;
    snprintf(key, sizeof key, "host/%d", q);
    if (coll__store_get(r->store, key, info, sizeof info - 1, &len, 0) !=
        COLL_OK) {
      if (gpus != NULL) gpus[q].host = -1 - q; /* a host of its own */
      continue;
    }
    info[len < sizeof info ? len : sizeof info - 1] = '\0';
    (void)coll__host_info_split(info, &host, &gpu);
    h = coll__host_table_index(&tab, host);
    if (h < 0) break;
    if (gpus != NULL) {
      gpus[q].host = h;
      coll__gpu_word(gpu, gpus[q].gpu);
    }
  }
  hosts = tab.n;
  if (gpus != NULL && q == r->world)
    coll__gpus_judge(gpus, r->world, order, &r->gpus);
  else if (gpus != NULL)
    missing(r, q); /* out of memory at q */
  coll__host_table_free(&tab);
  free(gpus);
  free(order);
  coll__err_restore(why);
  return hosts;
}
