/* SPDX-License-Identifier: Apache-2.0 */
/* test_nonblocking.c: the i-forms queued back to back (polled with
 * coll_test, waited in issue and in reverse order, completing in issue
 * order), a blocking call behind queued ones, and point-to-point: crossed
 * isend/irecv pairs, received counts, tags, and a message too long for the
 * receive buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"

#define MAX_WORLD 8
#define COMM_TIMEOUT_MS 60000
#define RUN_TIMEOUT_MS 200000
#define POLL_LIMIT_MS 60000

typedef enum { OP_AR, OP_BCAST, OP_AG, OP_RS, OP_REDUCE, OP_BARRIER } kind_t;

/* One queued collective of a round. */
typedef struct item {
  kind_t kind;
  coll_dtype_t dt;
  coll_op_t op;
  size_t count;
  int root; /* -1: world - 1 */
} item_t;

static const item_t k_items[] = {
    {OP_AR, COLL_F32, COLL_SUM, 1001, 0},
    {OP_BCAST, COLL_I32, COLL_SUM, 513, 1},
    {OP_AG, COLL_F64, COLL_SUM, 77, 0},
    {OP_RS, COLL_I32, COLL_SUM, 129, 0},
    {OP_REDUCE, COLL_F16, COLL_MAX, 300, -1},
    {OP_BARRIER, COLL_F32, COLL_SUM, 0, 0},
    {OP_AR, COLL_I8, COLL_SUM, 70001, 0},
    {OP_AR, COLL_F64, COLL_AVG, 50001, 0},
    {OP_AR, COLL_BF16, COLL_MIN, 3, 0},
};
#define NITEMS ((int)(sizeof k_items / sizeof k_items[0]))

typedef struct ctx {
  int world;
  coll_comm_t *comms[MAX_WORLD];
  t_fail_t fails;
} ctx_t;

typedef struct slot {
  unsigned char *send, *recv;
  uint64_t cas;
  coll_request_t *req;
} slot_t;

static int item_root(const item_t *it, int world) {
  return it->root < 0 ? world - 1 : it->root % world;
}

static coll_status_t issue(coll_comm_t *comm, int rank, int world,
                           const item_t *it, slot_t *s, uint64_t cas) {
  size_t es = t_size(it->dt), n = (size_t)world;
  int root = item_root(it, world);
  s->cas = cas;
  s->send = malloc(it->count * n * es + 1);
  s->recv = malloc(it->count * n * es + 1);
  s->req = NULL;
  if (s->send == NULL || s->recv == NULL) return COLL_ERR_NO_MEMORY;
  memset(s->recv, 0xA5, it->count * n * es);
  switch (it->kind) {
    case OP_AR:
      t_gen_n(it->dt, it->op, rank, 0, cas, s->send, it->count);
      return coll_iallreduce(comm, s->send, s->recv, it->count, it->dt, it->op,
                             NULL, &s->req);
    case OP_BCAST:
      if (rank == root) t_bytes(root, cas, s->recv, it->count * es);
      return coll_ibroadcast(comm, s->recv, it->count, it->dt, root, NULL,
                             &s->req);
    case OP_AG:
      t_bytes(rank, cas, s->send, it->count * es);
      return coll_iallgather(comm, s->send, s->recv, it->count, it->dt, NULL,
                             &s->req);
    case OP_RS:
      t_gen_n(it->dt, it->op, rank, 0, cas, s->send, it->count * n);
      return coll_ireduce_scatter(comm, s->send, s->recv, it->count, it->dt,
                                  it->op, NULL, &s->req);
    case OP_REDUCE:
      t_gen_n(it->dt, it->op, rank, 0, cas, s->send, it->count);
      return coll_ireduce(comm, s->send, rank == root ? s->recv : NULL,
                          it->count, it->dt, it->op, root, NULL, &s->req);
    default: return coll_ibarrier(comm, &s->req);
  }
}

static void check(ctx_t *c, int rank, const item_t *it, slot_t *s,
                  const char *round, int idx) {
  size_t es = t_size(it->dt), bytes = it->count * es;
  int root = item_root(it, c->world), q;
  char what[160];
  unsigned char *tmp = malloc(bytes * (size_t)c->world + 1);
  snprintf(what, sizeof what, "%s item %d (%s x %zu) world %d rank %d", round,
           idx, coll_dtype_name(it->dt), it->count, c->world, rank);
  if (tmp == NULL) {
    t_fail(&c->fails, "%s: out of memory in the test", what);
    return;
  }
  switch (it->kind) {
    case OP_AR:
      t_check_reduced(&c->fails, what, it->dt, it->op, c->world, 0, s->cas,
                      s->recv, it->count);
      break;
    case OP_BCAST:
      t_bytes(root, s->cas, tmp, bytes);
      if (memcmp(tmp, s->recv, bytes) != 0)
        t_fail(&c->fails, "%s: broadcast data differs from the root's", what);
      break;
    case OP_AG:
      for (q = 0; q < c->world; q++) {
        t_bytes(q, s->cas, tmp, bytes);
        if (memcmp(tmp, s->recv + (size_t)q * bytes, bytes) != 0)
          t_fail(&c->fails, "%s: allgather block %d is wrong", what, q);
      }
      break;
    case OP_RS:
      t_check_reduced(&c->fails, what, it->dt, it->op, c->world,
                      (size_t)rank * it->count, s->cas, s->recv, it->count);
      break;
    case OP_REDUCE:
      if (rank == root)
        t_check_reduced(&c->fails, what, it->dt, it->op, c->world, 0, s->cas,
                        s->recv, it->count);
      break;
    default: break;
  }
  free(tmp);
}

static void slot_free(slot_t *s) {
  free(s->send);
  free(s->recv);
  s->send = s->recv = NULL;
}

/* Polls in reverse issue order: once a later request was seen done, every
 * earlier one polled after it must be done too (issue-order completion). */
static void poll_all(ctx_t *c, int rank, slot_t *slots) {
  int64_t end = test_now_ms() + POLL_LIMIT_MS;
  int done[NITEMS] = {0}, ndone = 0, i;
  while (ndone < NITEMS) {
    int seen_later = -1;
    for (i = NITEMS - 1; i >= 0; i--) {
      int d = 0;
      coll_status_t s;
      if (done[i]) {
        if (seen_later < 0) seen_later = i;
        continue;
      }
      s = coll_test(slots[i].req, &d);
      if (!t_expect(&c->fails, s, COLL_OK, "coll_test rank %d item %d", rank,
                    i))
        return;
      if (d) {
        done[i] = 1;
        ndone++;
        if (seen_later < 0) seen_later = i;
      } else if (seen_later > i) {
        t_fail(&c->fails,
               "rank %d: item %d is done but item %d, issued "
               "before it, is not: completion out of issue order",
               rank, seen_later, i);
        return;
      }
    }
    if (test_now_ms() > end) {
      t_fail(&c->fails,
             "rank %d: %d of %d requests not done after %d ms of "
             "coll_test",
             rank, NITEMS - ndone, NITEMS, POLL_LIMIT_MS);
      return;
    }
    test_sleep_ms(1);
  }
}

static void round_rank(ctx_t *c, int rank, int reverse, int poll,
                       const char *name, uint64_t salt) {
  slot_t slots[NITEMS];
  int i, issued = 0;
  memset(slots, 0, sizeof slots);
  for (i = 0; i < NITEMS; i++) {
    coll_status_t s = issue(c->comms[rank], rank, c->world, &k_items[i],
                            &slots[i], t_mix(salt, (uint64_t)i, 77));
    if (!t_expect(&c->fails, s, COLL_OK, "%s: issuing item %d rank %d", name, i,
                  rank)) {
      slot_free(&slots[i]);
      break;
    }
    issued++;
  }
  if (poll && issued == NITEMS) poll_all(c, rank, slots);
  for (i = 0; i < issued; i++) {
    int k = reverse ? issued - 1 - i : i;
    coll_status_t s = coll_wait(slots[k].req);
    if (t_expect(&c->fails, s, COLL_OK, "%s: coll_wait item %d rank %d", name,
                 k, rank))
      check(c, rank, &k_items[k], &slots[k], name, k);
  }
  for (i = 0; i < issued; i++) slot_free(&slots[i]);
}

/* Three queued allreduces, then a blocking one: it runs after them. */
static void blocking_behind_rank(ctx_t *c, int rank) {
  enum { N = 3, COUNT = 4099 };
  slot_t slots[N];
  const item_t it = {OP_AR, COLL_I32, COLL_SUM, COUNT, 0};
  int32_t *buf = malloc(COUNT * sizeof *buf);
  uint64_t bcas = t_mix(0xb10c, (uint64_t)c->world, 0);
  coll_status_t s;
  int i;
  memset(slots, 0, sizeof slots);
  for (i = 0; i < N; i++)
    t_expect(&c->fails,
             issue(c->comms[rank], rank, c->world, &it, &slots[i],
                   t_mix(0xb10c, (uint64_t)c->world, (uint64_t)i + 1)),
             COLL_OK, "queued iallreduce %d rank %d", i, rank);
  if (buf == NULL) {
    t_fail(&c->fails, "out of memory in the test");
  } else {
    t_gen_n(COLL_I32, COLL_SUM, rank, 0, bcas, buf, COUNT);
    s = coll_allreduce(c->comms[rank], buf, buf, COUNT, COLL_I32, COLL_SUM,
                       NULL);
    if (t_expect(&c->fails, s, COLL_OK,
                 "blocking allreduce behind queued ones, rank %d", rank))
      t_check_reduced(&c->fails, "blocking allreduce behind queued ones",
                      COLL_I32, COLL_SUM, c->world, 0, bcas, buf, COUNT);
  }
  for (i = 0; i < N; i++) {
    if (slots[i].req == NULL) continue;
    s = coll_wait(slots[i].req);
    if (t_expect(&c->fails, s, COLL_OK, "queued iallreduce %d rank %d", i,
                 rank))
      check(c, rank, &it, &slots[i], "queued before a blocking call", i);
  }
  for (i = 0; i < N; i++) slot_free(&slots[i]);
  free(buf);
}

static void collectives_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  (void)world;
  round_rank(c, rank, 0, 1, "poll, then wait in issue order", 1);
  round_rank(c, rank, 1, 0, "wait in reverse order", 2);
  round_rank(c, rank, 1, 1, "poll, then wait in reverse order", 3);
  blocking_behind_rank(c, rank);
}

static void test_queued_collectives(void **state) {
  static const int worlds[] = {1, 2, 3, 4, 6};
  int i, n = t_quick() ? 3 : 5;
  ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  for (i = 0; i < n; i++) {
    c->world = worlds[n == 3 ? i + 1 : i];
    assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
    test_run_ranks(c->world, collectives_rank, c, RUN_TIMEOUT_MS,
                   "queued nonblocking collectives");
    test_destroy_comms(c->world, c->comms);
  }
  assert_int_equal(t_fail_report(&c->fails, "queued collectives"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* ---- point-to-point ------------------------------------------------------ */

#define BIG (1u << 18) /* int32 elements: 1 MiB, too big to be buffered */

static void fill_i32(int32_t *p, size_t n, int from, int salt) {
  size_t i;
  for (i = 0; i < n; i++)
    p[i] = (int32_t)(from * 1000003 + salt * 7919) + (int32_t)i;
}

static int check_i32(const int32_t *p, size_t n, int from, int salt) {
  size_t i;
  for (i = 0; i < n; i++)
    if (p[i] != (int32_t)(from * 1000003 + salt * 7919) + (int32_t)i) return 0;
  return 1;
}

/* Both ranks of a pair isend, then irecv, then wait: must not deadlock. */
static void crossed_pairs(ctx_t *c, int rank, int32_t *out, int32_t *in,
                          int recv_first) {
  int peer = rank ^ 1;
  coll_request_t *rs = NULL, *rr = NULL;
  size_t got = 0;
  coll_status_t s;
  fill_i32(out, BIG, rank, recv_first);
  memset(in, 0, BIG * sizeof *in);
  s = coll_isend(c->comms[rank], out, BIG, COLL_I32, peer, 3, &rs);
  if (!t_expect(&c->fails, s, COLL_OK, "isend rank %d", rank)) return;
  s = coll_irecv(c->comms[rank], in, BIG, COLL_I32, peer, 3, &got, &rr);
  if (!t_expect(&c->fails, s, COLL_OK, "irecv rank %d", rank)) {
    (void)coll_wait(rs);
    return;
  }
  if (recv_first) {
    t_expect(&c->fails, coll_wait(rr), COLL_OK, "wait(irecv) rank %d", rank);
    t_expect(&c->fails, coll_wait(rs), COLL_OK, "wait(isend) rank %d", rank);
  } else {
    t_expect(&c->fails, coll_wait(rs), COLL_OK, "wait(isend) rank %d", rank);
    t_expect(&c->fails, coll_wait(rr), COLL_OK, "wait(irecv) rank %d", rank);
  }
  if (got != BIG)
    t_fail(&c->fails, "irecv rank %d: *received = %zu, expected %u", rank, got,
           BIG);
  else if (!check_i32(in, BIG, peer, recv_first))
    t_fail(&c->fails, "irecv rank %d: wrong data from rank %d", rank, peer);
}

/* Blocking send/recv: shorter messages than the buffer, in order per tag,
 * a zero-length one, and two tags received in the opposite order. */
static void send_recv(ctx_t *c, int rank) {
  int peer = rank ^ 1, sender = !(rank & 1), k;
  int32_t buf[100];
  size_t got = 12345;
  coll_status_t s;
  coll_comm_t *comm = c->comms[rank];
  for (k = 1; k <= 3; k++) {
    if (sender) {
      fill_i32(buf, (size_t)k * 10, rank, k);
      t_expect(&c->fails,
               coll_send(comm, buf, (size_t)k * 10, COLL_I32, peer, 7), COLL_OK,
               "send %d rank %d", k, rank);
    } else {
      s = coll_recv(comm, buf, 100, COLL_I32, peer, 7, &got);
      if (!t_expect(&c->fails, s, COLL_OK, "recv %d rank %d", k, rank))
        continue;
      if (got != (size_t)k * 10 || !check_i32(buf, got, peer, k))
        t_fail(&c->fails,
               "recv %d rank %d: received %zu elements (expected "
               "%d) or wrong data: messages on one tag out of order?",
               k, rank, got, k * 10);
    }
  }
  /* A zero-length message. */
  if (sender) {
    t_expect(&c->fails, coll_send(comm, buf, 0, COLL_I32, peer, 8), COLL_OK,
             "send of 0 elements rank %d", rank);
  } else {
    got = 999;
    s = coll_recv(comm, buf, 100, COLL_I32, peer, 8, &got);
    if (t_expect(&c->fails, s, COLL_OK, "recv of 0 elements rank %d", rank) &&
        got != 0)
      t_fail(&c->fails, "recv of 0 elements: *received = %zu", got);
  }
  /* Tags 5 and 6 sent in that order, received 6 first. */
  if (sender) {
    int32_t a[4], b[6];
    coll_request_t *r5 = NULL, *r6 = NULL;
    fill_i32(a, 4, rank, 5);
    fill_i32(b, 6, rank, 6);
    if (t_expect(&c->fails, coll_isend(comm, a, 4, COLL_I32, peer, 5, &r5),
                 COLL_OK, "isend tag 5") &&
        t_expect(&c->fails, coll_isend(comm, b, 6, COLL_I32, peer, 6, &r6),
                 COLL_OK, "isend tag 6")) {
      t_expect(&c->fails, coll_wait(r5), COLL_OK, "wait(isend tag 5)");
      t_expect(&c->fails, coll_wait(r6), COLL_OK, "wait(isend tag 6)");
    } else if (r5 != NULL) {
      (void)coll_wait(r5);
    }
  } else {
    s = coll_recv(comm, buf, 100, COLL_I32, peer, 6, &got);
    if (t_expect(&c->fails, s, COLL_OK, "recv tag 6") &&
        (got != 6 || !check_i32(buf, 6, peer, 6)))
      t_fail(&c->fails, "recv tag 6: %zu elements or wrong data", got);
    s = coll_recv(comm, buf, 100, COLL_I32, peer, 5, NULL);
    if (t_expect(&c->fails, s, COLL_OK, "recv tag 5 (received NULL)") &&
        !check_i32(buf, 4, peer, 5))
      t_fail(&c->fails, "recv tag 5: wrong data");
  }
}

/* A message longer than the receive buffer: LENGTH_MISMATCH, nothing
 * written past the buffer, and *received left as it was (it is written
 * only on success), whether the receive is blocking, waited or tested.
 * A message that is not a whole number of elements is a mismatch too.
 * Last on the comm. */
#define UNTOUCHED ((size_t)12345)
static void too_long(ctx_t *c, int rank) {
  int peer = rank ^ 1, sender = !(rank & 1), i, k;
  int32_t big[100], small[10 + 16];
  coll_status_t s;
  coll_comm_t *comm = c->comms[rank];
  if (sender) {
    for (k = 0; k < 4; k++) {
      coll_request_t *r = NULL;
      fill_i32(big, 100, rank, 9 + k);
      s = k < 3 ? coll_isend(comm, big, 100, COLL_I32, peer, 9 + k, &r)
                : coll_isend(comm, big, 5, COLL_U8, peer, 9 + k, &r);
      if (!t_expect(&c->fails, s, COLL_OK, "isend %d", k)) continue;
      s = coll_wait(r);
      /* The sender learns either nothing (OK) or the mismatch. */
      if (s != COLL_OK && s != COLL_ERR_LENGTH_MISMATCH)
        t_fail(&c->fails, "sender of a too-long message: %s (%s)",
               coll_status_name(s), coll_last_error());
    }
    return;
  }
  for (k = 0; k < 4; k++) {
    static const char *const how[4] = {"recv", "irecv+wait", "irecv+test",
                                       "recv of 5 bytes as i32"};
    size_t got = UNTOUCHED;
    coll_request_t *r = NULL;
    int done = 0;
    for (i = 0; i < 26; i++) small[i] = -7;
    if (k == 0 || k == 3) {
      s = coll_recv(comm, small, 10, COLL_I32, peer, 9 + k, &got);
    } else {
      s = coll_irecv(comm, small, 10, COLL_I32, peer, 9 + k, &got, &r);
      if (!t_expect(&c->fails, s, COLL_OK, "%s: irecv", how[k])) continue;
      while (k == 2 && !done && coll_test(r, &done) == COLL_OK && !done)
        test_sleep_ms(1);
      s = coll_wait(r);
    }
    if (t_expect(&c->fails, s, COLL_ERR_LENGTH_MISMATCH,
                 "%s of a too-long message, rank %d", how[k], rank) &&
        coll_last_error()[0] == '\0')
      t_fail(&c->fails, "%s of a too-long message: no error text", how[k]);
    if (got != UNTOUCHED)
      t_fail(&c->fails, "%s of a too-long message set *received to %zu", how[k],
             got);
    for (i = 10; i < 26; i++)
      if (small[i] != -7) {
        t_fail(&c->fails,
               "%s of a too-long message wrote past the buffer "
               "(element %d)",
               how[k], i);
        break;
      }
  }
}

static void p2p_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  int32_t *out = malloc(BIG * sizeof *out), *in = malloc(BIG * sizeof *in);
  (void)world;
  if (out == NULL || in == NULL) {
    t_fail(&c->fails, "out of memory in the test");
  } else {
    crossed_pairs(c, rank, out, in, 0);
    crossed_pairs(c, rank, out, in, 1);
    send_recv(c, rank);
    too_long(c, rank);
  }
  free(out);
  free(in);
}

static void test_p2p(void **state) {
  ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  c->world = 4;
  assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
  test_run_ranks(c->world, p2p_rank, c, RUN_TIMEOUT_MS, "point-to-point");
  test_destroy_comms(c->world, c->comms);
  assert_int_equal(t_fail_report(&c->fails, "point-to-point"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

/* Collectives queued behind outstanding point-to-point requests. */
static void mixed_rank(int rank, int world, void *arg) {
  ctx_t *c = arg;
  int32_t out[64], in[64], v[8];
  coll_request_t *rr = NULL, *rs = NULL, *ra = NULL;
  size_t got = 0;
  int i;
  fill_i32(out, 64, rank, 11);
  for (i = 0; i < 8; i++) v[i] = rank + i;
  if (!t_expect(
          &c->fails,
          coll_irecv(c->comms[rank], in, 64, COLL_I32, rank ^ 1, 11, &got, &rr),
          COLL_OK, "irecv before a collective"))
    return;
  t_expect(
      &c->fails,
      coll_iallreduce(c->comms[rank], v, v, 8, COLL_I32, COLL_SUM, NULL, &ra),
      COLL_OK, "iallreduce between irecv and isend");
  t_expect(&c->fails,
           coll_isend(c->comms[rank], out, 64, COLL_I32, rank ^ 1, 11, &rs),
           COLL_OK, "isend after a collective");
  if (ra) t_expect(&c->fails, coll_wait(ra), COLL_OK, "wait(iallreduce)");
  if (rs) t_expect(&c->fails, coll_wait(rs), COLL_OK, "wait(isend)");
  t_expect(&c->fails, coll_wait(rr), COLL_OK, "wait(irecv)");
  if (got != 64 || !check_i32(in, 64, rank ^ 1, 11))
    t_fail(&c->fails, "mixed p2p rank %d: wrong message", rank);
  for (i = 0; i < 8; i++)
    if (v[i] != world * (world - 1) / 2 + world * i) {
      t_fail(&c->fails, "mixed p2p rank %d: allreduce result %d at %d", rank,
             v[i], i);
      break;
    }
}

static void test_p2p_with_collectives(void **state) {
  ctx_t *c = calloc(1, sizeof *c);
  (void)state;
  assert_non_null(c);
  t_fail_init(&c->fails);
  c->world = 4;
  assert_int_equal(test_inproc_comms(c->world, COMM_TIMEOUT_MS, c->comms), 0);
  test_run_ranks(c->world, mixed_rank, c, RUN_TIMEOUT_MS,
                 "point-to-point around a collective");
  test_destroy_comms(c->world, c->comms);
  assert_int_equal(t_fail_report(&c->fails, "p2p with collectives"), 0);
  t_fail_destroy(&c->fails);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_queued_collectives),
      cmocka_unit_test(test_p2p),
      cmocka_unit_test(test_p2p_with_collectives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
