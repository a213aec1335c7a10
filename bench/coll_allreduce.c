/* SPDX-License-Identifier: Apache-2.0 */
/* coll_allreduce.c: libcoll in bench/'s timing loop (bench_loop.h: in-place
 * f32 SUM allreduce, the same sizes, calibration, verification and output
 * as the Open MPI and Gloo drivers), so one table compares them measured
 * the same way. Built and run by vs-peers.sh and multihost.sh; the comm
 * comes from the environment (coll-run sets it).
 *
 *   coll-run -n N coll_allreduce [name]      (rank 0 prints the table) */
#include <stdio.h>

#include "bench_loop.h"
#include "coll.h"

static void ar_coll(float *buf, size_t count, void *ctx) {
  coll_status_t s = coll_allreduce((coll_comm_t *)ctx, buf, buf, count,
                                   COLL_F32, COLL_SUM, NULL);
  if (s != COLL_OK) {
    fprintf(stderr, "coll_allreduce: %s: %s\n", coll_status_name(s),
            coll_last_error());
    exit(1);
  }
}

int main(int argc, char **argv) {
  coll_comm_t *c = NULL;
  coll_status_t s = coll_comm_init_env(NULL, &c);
  int rc;
  if (s != COLL_OK) {
    fprintf(stderr, "coll_comm_init_env: %s: %s\n", coll_status_name(s),
            coll_last_error());
    return 1;
  }
  rc = bench_loop_run(argc > 1 ? argv[1] : "coll", coll_comm_rank(c),
                      coll_comm_size(c), ar_coll, c);
  coll_comm_destroy(c);
  return rc;
}
