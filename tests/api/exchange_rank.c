/* SPDX-License-Identifier: Apache-2.0 */
/* exchange_rank.c: one rank's gather, scatter, alltoall and alltoallv
 * cases (exchange_rank.h). The reference is serial and independent of the
 * library: block (from, to) of case `cas` is t_bytes(seed(from, to), cas),
 * so the receiver computes what must have arrived. Gaps between alltoallv
 * blocks hold a sentinel that must survive. */
#include "exchange_rank.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_test.h"

#define SENTINEL 0xA5

typedef struct xr {
  coll_comm_t *c;
  const xr_opts_t *o;
  xr_out_t *out;
  int rank, world;
} xr_t;

static void fail(xr_t *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(xr_t *x, const char *fmt, ...) {
  va_list ap;
  if (x->out->failed) return;
  x->out->failed = 1;
  va_start(ap, fmt);
  vsnprintf(x->out->msg, sizeof x->out->msg, fmt, ap);
  va_end(ap);
}

static void *get(xr_t *x, size_t bytes) {
  void *p =
      x->o->alloc ? x->o->alloc(bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
  if (p == NULL) fail(x, "rank %d: out of memory (%zu bytes)", x->rank, bytes);
  return p;
}

static void put(xr_t *x, void *p) {
  if (p == NULL) return;
  if (x->o->release)
    x->o->release(p);
  else
    free(p);
}

/* The bytes rank `from` sends rank `to` in case cas. */
static void block(int from, int to, uint64_t cas, void *buf, size_t bytes) {
  t_bytes(from * 4099 + to, cas, buf, bytes);
}

/* 1 if got[0..bytes) holds block (from, to); else records where not. */
static int check_block(xr_t *x, const char *what, int from, int to,
                       uint64_t cas, const void *got, size_t bytes) {
  unsigned char *want = malloc(bytes ? bytes : 1);
  size_t i;
  int ok = 1;
  if (want == NULL) {
    fail(x, "rank %d: out of memory", x->rank);
    return 0;
  }
  block(from, to, cas, want, bytes);
  for (i = 0; i < bytes; i++)
    if (((const unsigned char *)got)[i] != want[i]) {
      fail(x,
           "%s: rank %d, block from rank %d to rank %d: byte %zu of %zu is "
           "0x%02x, not 0x%02x",
           what, x->rank, from, to, i, bytes, ((const unsigned char *)got)[i],
           want[i]);
      ok = 0;
      break;
    }
  free(want);
  return ok;
}

static int called(xr_t *x, coll_status_t s, coll_request_t *req,
                  const char *what) {
  if (s == COLL_OK && req != NULL) s = coll_wait(req);
  x->out->checked++;
  if (s == COLL_OK) return 1;
  fail(x, "%s: rank %d: %s: %s", what, x->rank, coll_status_name(s),
       coll_last_error());
  return 0;
}

/* ---- gather and scatter ------------------------------------------------ */

static void gather(xr_t *x, size_t count, coll_dtype_t dt, int root,
                   int inplace, int nb, uint64_t cas) {
  size_t b = count * coll_dtype_size(dt), n = (size_t)x->world;
  char what[96], *all = NULL, *mine;
  coll_request_t *req = NULL;
  coll_status_t s;
  int r;
  snprintf(what, sizeof what, "%sgather of %zu %s to %d%s", nb ? "i" : "",
           count, coll_dtype_name(dt), root, inplace ? " in place" : "");
  if (x->rank == root) all = get(x, b * n);
  mine = inplace && x->rank == root ? all + (size_t)root * b : get(x, b);
  if (mine == NULL || (x->rank == root && all == NULL)) goto out;
  if (all != NULL) memset(all, SENTINEL, b * n);
  block(x->rank, root, cas, mine, b);
  if (nb)
    s = coll_igather(x->c, mine, all, count, dt, root, NULL, &req);
  else
    s = coll_gather(x->c, mine, all, count, dt, root, NULL);
  if (called(x, s, req, what) && x->rank == root)
    for (r = 0; r < x->world; r++)
      if (!check_block(x, what, r, root, cas, all + (size_t)r * b, b)) break;
out:
  if (!(inplace && x->rank == root)) put(x, mine);
  put(x, all);
}

static void scatter(xr_t *x, size_t count, coll_dtype_t dt, int root,
                    int inplace, int nb, uint64_t cas) {
  size_t b = count * coll_dtype_size(dt), n = (size_t)x->world;
  char what[96], *all = NULL, *mine;
  coll_request_t *req = NULL;
  coll_status_t s;
  int r;
  snprintf(what, sizeof what, "%sscatter of %zu %s from %d%s", nb ? "i" : "",
           count, coll_dtype_name(dt), root, inplace ? " in place" : "");
  if (x->rank == root) {
    all = get(x, b * n);
    if (all == NULL) return;
    for (r = 0; r < x->world; r++) block(root, r, cas, all + (size_t)r * b, b);
  }
  mine = inplace && x->rank == root ? all + (size_t)root * b : get(x, b);
  if (mine == NULL) goto out;
  if (!(inplace && x->rank == root)) memset(mine, SENTINEL, b);
  if (nb)
    s = coll_iscatter(x->c, all, mine, count, dt, root, NULL, &req);
  else
    s = coll_scatter(x->c, all, mine, count, dt, root, NULL);
  if (called(x, s, req, what))
    check_block(x, what, root, x->rank, cas, mine, b);
out:
  if (!(inplace && x->rank == root)) put(x, mine);
  put(x, all);
}

/* ---- all-to-all --------------------------------------------------------- */

static void alltoall(xr_t *x, size_t count, coll_dtype_t dt, int nb,
                     uint64_t cas) {
  size_t b = count * coll_dtype_size(dt), n = (size_t)x->world;
  char what[96], *send = get(x, b * n), *recv = get(x, b * n);
  coll_request_t *req = NULL;
  coll_status_t s;
  int r;
  snprintf(what, sizeof what, "%salltoall of %zu %s", nb ? "i" : "", count,
           coll_dtype_name(dt));
  if (send == NULL || recv == NULL) goto out;
  for (r = 0; r < x->world; r++)
    block(x->rank, r, cas, send + (size_t)r * b, b);
  memset(recv, SENTINEL, b * n);
  if (nb)
    s = coll_ialltoall(x->c, send, recv, count, dt, NULL, &req);
  else
    s = coll_alltoall(x->c, send, recv, count, dt, NULL);
  if (called(x, s, req, what))
    for (r = 0; r < x->world; r++)
      if (!check_block(x, what, r, x->rank, cas, recv + (size_t)r * b, b))
        break;
out:
  put(x, send);
  put(x, recv);
}

/* The count rank `from` sends rank `to` in an alltoallv of scale k: zero
 * for some pairs, different for most. allgatherv: by the sender only. */
static size_t vcount(int from, int to, size_t k, int allgatherv) {
  if (allgatherv) return (size_t)(from % 3) * k + (from == 1 ? 0 : 1);
  return (size_t)((from * 7 + to * 3) % 5) * k;
}

typedef struct vlayout {
  size_t sc[64], sd[64], rc[64], rd[64];
  size_t send_len, recv_len; /* elements */
} vlayout_t;

/* Sends packed in reverse rank order with a gap of one element (or all at
 * displacement 0: allgatherv); receives in rank order with a gap of two. */
static void vlayout(const xr_t *x, size_t k, int allgatherv, vlayout_t *L) {
  size_t at = 1;
  int r;
  for (r = x->world - 1; r >= 0; r--) {
    L->sc[r] = vcount(x->rank, r, k, allgatherv);
    L->sd[r] = allgatherv ? 0 : at;
    at += allgatherv ? 0 : L->sc[r] + 1;
  }
  L->send_len = allgatherv ? L->sc[0] : at;
  for (at = 2, r = 0; r < x->world; r++) {
    L->rc[r] = vcount(r, x->rank, k, allgatherv);
    L->rd[r] = at;
    at += L->rc[r] + 2;
  }
  L->recv_len = at;
}

static void check_gaps(xr_t *x, const char *what, const unsigned char *recv,
                       const vlayout_t *L, size_t es) {
  size_t i, r = 0;
  for (i = 0; i < L->recv_len * es; i++) {
    while (r < (size_t)x->world && i >= (L->rd[r] + L->rc[r]) * es) r++;
    if (r < (size_t)x->world && i >= L->rd[r] * es) continue; /* in block r */
    if (recv[i] != SENTINEL) {
      fail(x, "%s: rank %d: byte %zu, between blocks, was written", what,
           x->rank, i);
      return;
    }
  }
}

static void alltoallv(xr_t *x, size_t k, coll_dtype_t dt, int allgatherv,
                      int nb, uint64_t cas) {
  size_t es = coll_dtype_size(dt);
  vlayout_t L;
  char what[96], *send, *recv;
  coll_request_t *req = NULL;
  coll_status_t s;
  int r;
  vlayout(x, k, allgatherv, &L);
  send = get(x, L.send_len * es);
  recv = get(x, L.recv_len * es);
  snprintf(what, sizeof what, "%salltoallv%s of %s, scale %zu", nb ? "i" : "",
           allgatherv ? " (allgatherv)" : "", coll_dtype_name(dt), k);
  if (send == NULL || recv == NULL) goto out;
  memset(send, SENTINEL, L.send_len * es);
  for (r = 0; r < x->world; r++)
    block(x->rank, allgatherv ? -1 : r, cas, send + L.sd[r] * es, L.sc[r] * es);
  memset(recv, SENTINEL, L.recv_len * es);
  if (nb)
    s = coll_ialltoallv(x->c, send, L.sc, L.sd, recv, L.rc, L.rd, dt, NULL,
                        &req);
  else
    s = coll_alltoallv(x->c, send, L.sc, L.sd, recv, L.rc, L.rd, dt, NULL);
  if (!called(x, s, req, what)) goto out;
  for (r = 0; r < x->world; r++)
    if (!check_block(x, what, r, allgatherv ? -1 : x->rank, cas,
                     recv + L.rd[r] * es, L.rc[r] * es))
      goto out;
  check_gaps(x, what, (unsigned char *)recv, &L, es);
out:
  put(x, send);
  put(x, recv);
}

/* Rank 0 sends rank 1 one element more than rank 1 expects: every rank
 * reports a mismatch, rank 1 naming rank 0, and the comm keeps working. */
static void mismatch(xr_t *x) {
  size_t sc[64], sd[64], rc[64], rd[64];
  char send[64 * 4], recv[64 * 4];
  coll_status_t s;
  int r;
  for (r = 0; r < x->world; r++) {
    sc[r] = rc[r] = 2;
    sd[r] = rd[r] = 4 * (size_t)r;
  }
  if (x->rank == 0) sc[1] = 3;
  memset(send, 1, sizeof send);
  s = coll_alltoallv(x->c, send, sc, sd, recv, rc, rd, COLL_U8, NULL);
  x->out->checked++;
  if (s != COLL_ERR_LENGTH_MISMATCH) {
    fail(x, "mismatched alltoallv: rank %d got %s (%s), not a length mismatch",
         x->rank, coll_status_name(s), coll_last_error());
    return;
  }
  if (strstr(coll_last_error(), "alltoallv") == NULL ||
      strstr(coll_last_error(), "rank 0") == NULL) {
    fail(x,
         "mismatched alltoallv: rank %d's text does not name the call and "
         "rank 0: %s",
         x->rank, coll_last_error());
    return;
  }
  alltoall(x, 3, COLL_U8, 0, 777); /* the comm still works */
}

/* ---- the cases ---------------------------------------------------------- */

void xr_run(coll_comm_t *c, const xr_opts_t *o, xr_out_t *out) {
  static const coll_dtype_t dts[] = {COLL_U8, COLL_F16, COLL_F32, COLL_I64};
  const size_t counts[] = {0, 1, 5, 1031, 70001};
  size_t ncounts = o->quick ? 4 : 5, ndt = o->quick ? 2 : 4, ci, di;
  xr_t x;
  int root, inplace;
  x.c = c;
  x.o = o;
  x.out = out;
  x.rank = coll_comm_rank(c);
  x.world = coll_comm_size(c);
  if (x.world > 64) {
    fail(&x, "world %d: the cases are written for up to 64 ranks", x.world);
    return;
  }
  for (ci = 0; ci < ncounts && !out->failed; ci++)
    for (di = 0; di < ndt && !out->failed; di++) {
      size_t n = counts[ci];
      coll_dtype_t dt = dts[di];
      uint64_t cas = t_mix(n, (uint64_t)dt, (uint64_t)x.world);
      int nb = (ci + di) % 2;
      for (root = 0; root < x.world && !out->failed; root++)
        for (inplace = 0; inplace < 2; inplace++) {
          gather(&x, n, dt, root, inplace, nb, cas + (uint64_t)root);
          scatter(&x, n, dt, root, inplace, nb, cas ^ (uint64_t)root);
        }
      alltoall(&x, n, dt, nb, cas + 17);
      alltoallv(&x, n, dt, 0, nb, cas + 31);
      alltoallv(&x, n, dt, 1, !nb, cas + 47);
    }
  if (o->mismatch && x.world >= 2 && !out->failed) mismatch(&x);
}
