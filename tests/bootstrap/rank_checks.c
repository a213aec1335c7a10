/* SPDX-License-Identifier: Apache-2.0 */
/* rank_checks.c: broadcasts, allgathers and reduce-scatters checked on a
 * rank (rank_checks.h). */
#include "rank_checks.h"

#include <stdlib.h>
#include <string.h>

void bt_check_broadcasts(coll_comm_t *c, int rank, int world,
                         const size_t *sizes, size_t k, bt_rank_out_t *o) {
  for (size_t b = 0; b < k && !o->status; b++)
    for (int root = 0; root < world && !o->status; root++) {
      size_t n = sizes[b], at;
      char *buf = malloc(n), *want = malloc(n);
      coll_status_t s;
      if (buf == NULL || want == NULL) {
        bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
      } else {
        bt_fill_values(want, COLL_U8, COLL_SUM, 50 + root, n);
        if (rank == root)
          memcpy(buf, want, n);
        else
          memset(buf, 0xee, n);
        s = coll_broadcast(c, buf, n, COLL_U8, root, NULL);
        if (s != COLL_OK)
          bt_out_fail(o, s, "broadcast %zu from %d: %s", n, root,
                      coll_last_error());
        else if (!bt_same(buf, want, n, &at))
          bt_out_fail(o, COLL_OK, "broadcast %zu from %d: byte %zu differs", n,
                      root, at);
        o->checked++;
      }
      free(buf);
      free(want);
    }
}

void bt_check_allgathers(coll_comm_t *c, int rank, int world,
                         const size_t *sizes, size_t k, bt_rank_out_t *o) {
  for (size_t b = 0; b < k && !o->status; b++) {
    size_t n = sizes[b], at, all_n = n * (size_t)world;
    int in_place = (int)(b & 1);
    char *all = malloc(all_n), *want = malloc(all_n), *mine = malloc(n);
    coll_status_t s;
    if (all == NULL || want == NULL || mine == NULL) {
      bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
      goto next;
    }
    for (int r = 0; r < world; r++)
      bt_fill_values(want + (size_t)r * n, COLL_U8, COLL_SUM, r, n);
    memset(all, 0xee, all_n);
    bt_fill_values(mine, COLL_U8, COLL_SUM, rank, n);
    if (in_place) memcpy(all + (size_t)rank * n, mine, n);
    s = coll_allgather(c, in_place ? all + (size_t)rank * n : mine, all, n,
                       COLL_U8, NULL);
    if (s != COLL_OK)
      bt_out_fail(o, s, "allgather %zu: %s", n, coll_last_error());
    else if (!bt_same(all, want, all_n, &at))
      bt_out_fail(o, COLL_OK,
                  "allgather %zu (%s): byte %zu (rank %zu's) differs", n,
                  in_place ? "in place" : "out of place", at, at / n);
    o->checked++;
  next:
    free(all);
    free(want);
    free(mine);
  }
}

void bt_check_reduce_scatter(coll_comm_t *c, int rank, int world,
                             coll_dtype_t dt, coll_op_t op, size_t n,
                             bt_rank_out_t *o) {
  size_t es = coll_dtype_size(dt), in_n = n * es * (size_t)world, at;
  char *send = malloc(in_n), *again = malloc(in_n), *got = malloc(n * es);
  char *want = malloc(n * es);
  coll_status_t s;
  if (send == NULL || again == NULL || got == NULL || want == NULL ||
      bt_reference(want, dt, op, world, rank, n) != 0) {
    bt_out_fail(o, COLL_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  /* Block r of this rank's input: seed rank + 4 r, as bt_reference has it. */
  for (int r = 0; r < world; r++)
    bt_fill_values(send + (size_t)r * n * es, dt, op, rank + 4 * r, n);
  memcpy(again, send, in_n);
  s = coll_reduce_scatter(c, send, got, n, dt, op, NULL);
  if (s != COLL_OK)
    bt_out_fail(o, s, "reduce-scatter %s %s %zu: %s", coll_dtype_name(dt),
                coll_op_name(op), n, coll_last_error());
  else if (!bt_same(got, want, n * es, &at))
    bt_out_fail(o, COLL_OK,
                "reduce-scatter %s %s %zu: element %zu differs from the "
                "serial reference in rank order",
                coll_dtype_name(dt), coll_op_name(op), n, at / es);
  else if (memcmp(send, again, in_n) != 0)
    bt_out_fail(o, COLL_OK, "reduce-scatter %s %s %zu: send buffer changed",
                coll_dtype_name(dt), coll_op_name(op), n);
  o->checked++;
done:
  free(send);
  free(again);
  free(got);
  free(want);
}
