/* SPDX-License-Identifier: Apache-2.0 */
/* provider.c: a third party's transport built against an installed libcoll,
 * from coll_transport.h alone. */
#include <coll_transport.h>
#include <stdio.h>

/* A world of one rank: libcoll never sends to or receives from its own
 * rank, so the data slots are never called and refuse if they are. */
static coll_status_t no_isend(void *ctx, int peer, uint32_t tag,
                              const void *buf, size_t len, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
  return coll_set_last_error(COLL_ERR_INTERNAL, "provider: isend called");
}
static coll_status_t no_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                              size_t cap, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)cap, (void)req;
  return coll_set_last_error(COLL_ERR_INTERNAL, "provider: irecv called");
}
static coll_status_t no_wait(void *ctx, void *req, int64_t timeout_ms,
                             size_t *len) {
  (void)ctx, (void)req, (void)timeout_ms, (void)len;
  return coll_set_last_error(COLL_ERR_INTERNAL, "provider: wait called");
}
static void noop(void *ctx) { (void)ctx; }
static void count_destroy(void *ctx) { ++*(int *)ctx; }

int main(void) {
  static const coll_transport_ops_t ops = {
      .size = sizeof(coll_transport_ops_t),
      .version = COLL_TRANSPORT_OPS_VERSION,
      .name = "provider",
      .isend = no_isend,
      .irecv = no_irecv,
      .wait = no_wait,
      .abort = noop,
      .destroy = count_destroy};
  int destroyed = 0;
  coll_transport_t *t;
  coll_comm_t *c;
  float x[2] = {1, 2};
  if (coll_transport_create(&ops, &destroyed, 0, 1, &t) != COLL_OK ||
      coll_comm_create(t, NULL, &c) != COLL_OK ||
      coll_allreduce(c, x, x, 2, COLL_F32, COLL_SUM, NULL) != COLL_OK) {
    fprintf(stderr, "provider: %s\n", coll_last_error());
    return 1;
  }
  coll_comm_destroy(c);
  printf("provider: a transport of one's own works (%g %g), destroyed %d\n",
         (double)x[0], (double)x[1], destroyed);
  return x[1] == 2.0f && destroyed == 1 ? 0 : 1;
}
