/* SPDX-License-Identifier: Apache-2.0 */
/* stream.c: a buffer moved in segments from one peer to the next, each
 * segment sent on as soon as it arrived: the link of a pipelined chain. */
#include <string.h>

#include "algo/algo_util.h"

#define STREAM_RECVS 4 /* receives kept posted ahead, straight into buf */
#define STREAM_SENDS 8 /* sends in flight before the oldest is waited */

static size_t seg_len(size_t bytes, size_t seg, size_t j) {
  size_t left = bytes - j * seg;
  return left < seg ? left : seg;
}

coll_status_t coll__algo_stream(algo_run_t *run, int from, int to, char *buf,
                                size_t bytes, size_t seg) {
  algo_req_t rq[STREAM_RECVS], sq[STREAM_SENDS];
  size_t nseg, j, posted = 0, shead = 0, scount = 0;
  coll_status_t s = COLL_OK;
  memset(rq, 0, sizeof rq);
  memset(sq, 0, sizeof sq);
  if (seg == 0) seg = 1;
  nseg = bytes / seg + (bytes % seg != 0);
  for (j = 0; j < nseg; j++) {
    size_t len = seg_len(bytes, seg, j);
    if (from >= 0) {
      while (posted < nseg && posted < j + STREAM_RECVS) {
        s = coll__algo_irecv(run, &rq[posted % STREAM_RECVS], from,
                             buf + posted * seg, seg_len(bytes, seg, posted));
        if (s != COLL_OK) goto out;
        posted++;
      }
      s = coll__algo_wait(run, &rq[j % STREAM_RECVS], len);
      if (s != COLL_OK) goto out;
    }
    if (to < 0) continue;
    /* The chain has no cycle: the receiver downstream drains these without
     * waiting for anything of ours, so waiting the oldest is safe. */
    if (scount == STREAM_SENDS) {
      s = coll__algo_wait(run, &sq[shead], 0);
      if (s != COLL_OK) goto out;
      shead = (shead + 1) % STREAM_SENDS;
      scount--;
    }
    s = coll__algo_isend(run, &sq[(shead + scount) % STREAM_SENDS], to,
                         buf + j * seg, len);
    if (s != COLL_OK) goto out;
    scount++;
  }
  for (; scount > 0; scount--) {
    s = coll__algo_wait(run, &sq[shead], 0);
    if (s != COLL_OK) goto out;
    shead = (shead + 1) % STREAM_SENDS;
  }
out:
  if (s != COLL_OK) {
    coll__algo_cancel(run, rq, STREAM_RECVS);
    coll__algo_cancel(run, sq, STREAM_SENDS);
  }
  return s;
}
