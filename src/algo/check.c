/* SPDX-License-Identifier: Apache-2.0 */
/* check.c: the descriptor check over messages (agree.h): one step of its
 * pattern, which carriers send their data in; the pattern alone (the
 * standalone agreement); and the entry every other algorithm's caller
 * uses, which runs the check in the form the transport needs.
 *
 * Recursive doubling: in round k each rank swaps its state with rank ^ 2^k.
 * A state is the rank's own descriptor, a "mismatch seen" flag, and a
 * disagreement it knows of (two ranks and their descriptors). After
 * round k a rank knows whether the 2^(k+1) ranks of its group agree: its
 * half agrees with its own descriptor (else the flag is set), the partner's
 * half with the partner's, and it compares the two. With n not a power of
 * two, ranks from p (the largest power of two below n) first fold their
 * state into rank - p and get the result back at the end. The messages are
 * the same whatever the descriptors hold, so disagreeing ranks never wait
 * for a message that does not come. */
#include <string.h>

#include "algo/agree.h"

/* Every receive of the pattern takes this much: a full state and the
 * largest payload any path sends. */
#define MSG_CAP (COLL_AGREE_BYTES + COLL_AGREE_PAYLOAD_MAX)
/* Where a receive lands in its area: a compact state then ends at the
 * head, and the data after it starts there. */
#define IN_AT (COLL_CHECK_HEAD - COLL_AGREE_MIN_BYTES)

int coll__check_carried(const coll_algo_ctx_t *ctx, size_t payload) {
  return ctx->check != NULL && ctx->world > 1 &&
         coll__t_rounds(ctx->t) == NULL && payload <= COLL_AGREE_PAYLOAD_MAX;
}

void coll__check_init(coll_check_t *K, const coll_algo_ctx_t *ctx, void *mem) {
  coll__agree_state_init(&K->st, ctx->check);
  K->odd = 0;
  K->out = mem;
  K->in = (unsigned char *)mem + COLL_CHECK_AREA;
}

/* Without a check: the data alone, straight between the caller's
 * buffers. */
static coll_status_t plain_swap(algo_run_t *run, algo_req_t req[2],
                                const coll_check_step_t *x, char **got) {
  if (x->recv)
    COLL_CHECK(coll__algo_irecv(run, &req[0], x->peer, x->in, x->in_n));
  if (x->send)
    COLL_CHECK(coll__algo_isend(run, &req[1], x->peer, x->out, x->out_n));
  if (x->recv) COLL_CHECK(coll__algo_wait(run, &req[0], x->in_n));
  if (x->send) COLL_CHECK(coll__algo_wait(run, &req[1], 0));
  *got = x->recv ? x->in : NULL;
  return COLL_OK;
}

/* Folds the peer's state `in` (its message was n bytes, its state st_len
 * of them) into K, and says where its data is, if this rank can use it. */
static void take(coll_check_t *K, algo_run_t *run, const coll_check_step_t *x,
                 const agree_state_t *in, size_t n, size_t st_len, char **got) {
  const coll_algo_ctx_t *ctx = run->ctx;
  size_t payload = n - st_len;
  if (x->adopt)
    coll__agree_adopt(&K->st, in);
  else
    coll__agree_merge(&K->st, coll__ctx_rank(ctx, ctx->rank),
                      coll__ctx_rank(ctx, x->peer), in);
  *got = NULL;
  /* Data this rank can combine: the peer's state is compact (it knows of
   * no disagreement) and its data is the size this rank's path expects. */
  if (st_len == COLL_AGREE_MIN_BYTES && payload == x->in_n && !K->st.flag &&
      !K->odd) {
    *got = (char *)K->in + COLL_CHECK_HEAD;
    return;
  }
  /* The same descriptor with data of another size, or none: the peer ran
   * another path, which only a tuning variable set differently makes. */
  if (payload != x->in_n && coll__desc_equal(&in->mine, &K->st.mine))
    K->odd = 1;
}

coll_status_t coll__check_swap(coll_check_t *K, algo_run_t *run,
                               algo_req_t req[2], const coll_check_step_t *x,
                               char **got) {
  unsigned char head[COLL_AGREE_BYTES];
  agree_state_t in;
  size_t hl = 0, len = 0, n = 0, st_len;
  if (K == NULL) return plain_swap(run, req, x, got);
  if (x->send) {
    /* The state right before the data; once a disagreement or another
     * path is known the data no longer matters, and the state goes
     * alone. */
    int data = K->st.flag == 0 && K->st.ra < 0 && !K->odd;
    hl = coll__agree_pack_compact(head, &K->st);
    memcpy(K->out + COLL_CHECK_HEAD - hl, head, hl);
    if (data && x->out_n > 0 && x->out != coll__check_mine(K))
      memcpy(K->out + COLL_CHECK_HEAD, x->out, x->out_n);
    len = hl + (data ? x->out_n : 0);
  }
  if (x->recv)
    COLL_CHECK(coll__algo_irecv(run, &req[0], x->peer, K->in + IN_AT, MSG_CAP));
  if (x->send)
    COLL_CHECK(coll__algo_isend(run, &req[1], x->peer,
                                K->out + COLL_CHECK_HEAD - hl, len));
  if (x->recv)
    COLL_CHECK(
        coll__algo_wait_range(run, &req[0], COLL_AGREE_MIN_BYTES, MSG_CAP, &n));
  if (x->send) COLL_CHECK(coll__algo_wait(run, &req[1], 0));
  *got = NULL;
  if (!x->recv) return COLL_OK;
  st_len = coll__agree_unpack(K->in + IN_AT, n, &in);
  if (st_len == 0)
    return coll__algo_fail(run, COLL_ERR_PROTOCOL,
                           "rank %d's check state: %zu bytes, short of its "
                           "form",
                           coll__ctx_rank(run->ctx, x->peer), n);
  take(K, run, x, &in, n, st_len, got);
  return COLL_OK;
}

coll_status_t coll__check_verdict(const coll_check_t *K,
                                  const coll_algo_ctx_t *ctx,
                                  const char *what) {
  return coll__agree_verdict(&K->st, K->odd, coll__ctx_rank(ctx, ctx->rank),
                             ctx->check, what);
}

/* The pattern with no data. */
static coll_status_t agree_body(coll_check_t *K, algo_run_t *run,
                                algo_req_t req[2], int rank, int n) {
  coll_check_step_t x = {0};
  char *got;
  int p = 1, mask;
  while (p <= n / 2) p <<= 1;
  if (rank >= p) {
    x.peer = rank - p;
    x.send = 1;
    COLL_CHECK(coll__check_swap(K, run, req, &x, &got));
    x.send = 0;
    x.recv = x.adopt = 1;
    return coll__check_swap(K, run, req, &x, &got);
  }
  if (rank + p < n) {
    x.peer = rank + p;
    x.recv = 1;
    COLL_CHECK(coll__check_swap(K, run, req, &x, &got));
  }
  x.send = x.recv = 1;
  for (mask = 1; mask < p; mask <<= 1) {
    x.peer = rank ^ mask;
    COLL_CHECK(coll__check_swap(K, run, req, &x, &got));
  }
  if (rank + p < n) {
    x.peer = rank + p;
    x.recv = 0;
    COLL_CHECK(coll__check_swap(K, run, req, &x, &got));
  }
  return COLL_OK;
}

coll_status_t coll__agree(const coll_algo_ctx_t *ctx, const coll_desc_t *d) {
  coll_algo_ctx_t c = *ctx;
  coll_check_t K;
  algo_run_t run;
  algo_req_t req[2] = {{0}, {0}};
  void *mem;
  if (ctx->world == 1) return COLL_OK;
  c.check = d;
  coll__algo_run_init(&run, &c, "agree", ALGO_PH_AGREE);
  mem = coll__scratch_get(c.scratch, 2 * COLL_CHECK_AREA);
  if (mem == NULL) return coll__algo_fail(&run, COLL_ERR_NO_MEMORY, "scratch");
  coll__check_init(&K, &c, mem);
  if (agree_body(&K, &run, req, c.rank, c.world) != COLL_OK) {
    coll__algo_cancel(&run, req, 2);
    return coll__algo_done(&run);
  }
  return coll__check_verdict(&K, &c, "the agreement");
}

coll_status_t coll__check_alone(const coll_algo_ctx_t *ctx) {
  if (ctx->check == NULL || ctx->world < 2) return COLL_OK;
  /* Where the ranks share memory the check is a round of notes, the one
   * the shared-memory allreduce carries it in. */
  if (coll__t_rounds(ctx->t) != NULL) return coll__agree_shm(ctx, ctx->check);
  return coll__agree(ctx, ctx->check);
}
