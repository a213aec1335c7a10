/* SPDX-License-Identifier: Apache-2.0 */
/* test_bad_handles.c: comm constructors, abort handles, transports and the
 * NCCL entry points refuse bad arguments with the right status and a
 * sentence naming them, and a config made without its INIT macro is
 * caught. (Collectives: test_bad_input.c.) */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input.h"
#include "coll_transport.h"

/* ---- comms, handles, transports ---------------------------------------- */

typedef struct fake {
  int destroyed;
} fake_t;

static coll_status_t f_isend(void *ctx, int peer, uint32_t tag, const void *buf,
                             size_t len, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
  return COLL_ERR_INTERNAL;
}
static coll_status_t f_irecv(void *ctx, int peer, uint32_t tag, void *buf,
                             size_t cap, void **req) {
  (void)ctx, (void)peer, (void)tag, (void)buf, (void)cap, (void)req;
  return COLL_ERR_INTERNAL;
}
static coll_status_t f_wait(void *ctx, void *req, int64_t t, size_t *len) {
  (void)ctx, (void)req, (void)t, (void)len;
  return COLL_ERR_INTERNAL;
}
static void f_abort(void *ctx) { (void)ctx; }
static void f_destroy(void *ctx) { ((fake_t *)ctx)->destroyed++; }

static coll_transport_ops_t fake_ops(void) {
  coll_transport_ops_t o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.version = COLL_TRANSPORT_OPS_VERSION;
  o.name = "fake";
  o.isend = f_isend;
  o.irecv = f_irecv;
  o.wait = f_wait;
  o.abort = f_abort;
  o.destroy = f_destroy;
  return o;
}

static void transport_args(void) {
  coll_transport_ops_t o;
  coll_transport_t *t = (coll_transport_t *)&o; /* must be overwritten */
  fake_t f;
  int slot;
  BAD(coll_transport_create(NULL, &f, 0, 1, &t), "transport_create");
  CHECK(t == NULL);
  /* Whatever is wrong, a refused table leaves ctx to the caller: no slot
   * is called, not even destroy. */
  o = fake_ops();
  o.size = offsetof(coll_transport_ops_t, isend);
  f.destroyed = 0;
  BAD(coll_transport_create(&o, &f, 0, 1, &t), "transport_create");
  CHECK(f.destroyed == 0);
  o.size = 0;
  BAD(coll_transport_create(&o, &f, 0, 1, &t), "transport_create");
  CHECK(f.destroyed == 0);
  /* Each mandatory slot missing in turn. */
  for (slot = 0; slot < 5; slot++) {
    o = fake_ops();
    switch (slot) {
      case 0: o.isend = NULL; break;
      case 1: o.irecv = NULL; break;
      case 2: o.wait = NULL; break;
      case 3: o.abort = NULL; break;
      default: o.destroy = NULL; break;
    }
    f.destroyed = 0;
    BAD(coll_transport_create(&o, &f, 0, 1, &t), "transport_create");
    CHECK(f.destroyed == 0);
  }
  /* Valid table, bad placement. */
  o = fake_ops();
  f.destroyed = 0;
  BAD(coll_transport_create(&o, &f, -1, 2, &t), "transport_create");
  BAD(coll_transport_create(&o, &f, 2, 2, &t), "transport_create");
  BAD(coll_transport_create(&o, &f, 0, 0, &t), "transport_create");
  BAD(coll_transport_create(&o, &f, 0, 1, NULL), "transport_create");
  CHECK(f.destroyed == 0);
  /* A good one, destroyed without a comm: its destroy runs once. */
  f.destroyed = 0;
  EXPECT(coll_transport_create(&o, &f, 1, 3, &t), COLL_OK, "");
  CHECK(coll_transport_rank(t) == 1 && coll_transport_size(t) == 3);
  coll_transport_destroy(t);
  CHECK(f.destroyed == 1);
  coll_transport_destroy(NULL);
  CHECK(coll_transport_rank(NULL) == -1 && coll_transport_size(NULL) == -1);
}

static void comm_args(void) {
  coll_transport_t *ts[2];
  coll_comm_t *c = (coll_comm_t *)ts; /* must be overwritten */
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_abort_handle_t *h = NULL;
  BAD(coll_inproc_create(0, ts), "inproc");
  BAD(coll_inproc_create(-3, ts), "inproc");
  BAD(coll_inproc_create(2, NULL), "inproc");
  BAD(coll_comm_create(NULL, NULL, &c), "comm_create");
  CHECK(c == NULL);
  /* The transport moves to the comm also on failure (no leak, no double
   * free: the sanitizer builds check). */
  EXPECT(coll_inproc_create(2, ts), COLL_OK, "");
  BAD(coll_comm_create(ts[0], NULL, NULL), "comm_create");
  cfg.size = 0;
  BAD(coll_comm_create(ts[1], &cfg, &c), "comm_create");
  CHECK(c == NULL);
  /* A config as an older caller compiled it (no name field) is fine. */
  EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
  cfg.size = offsetof(coll_comm_config_t, name);
  cfg.timeout_ms = 1000;
  EXPECT(coll_comm_create(ts[0], &cfg, &c), COLL_OK, "");
  CHECK(coll_comm_rank(c) == 0 && coll_comm_size(c) == 1);
  CHECK(coll_comm_backend(c) != NULL &&
        strcmp(coll_comm_backend(c), "cpu") == 0);
  EXPECT(coll_comm_destroy(c), COLL_OK, "");
  CHECK(coll_comm_rank(NULL) == -1 && coll_comm_size(NULL) == -1);
  CHECK(coll_comm_backend(NULL) == NULL);
  CHECK(coll_comm_destroy(NULL) == COLL_OK);
  /* Abort handles. */
  BAD(coll_comm_abort_handle(NULL, &h), "abort_handle");
  EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
  EXPECT(coll_comm_create(ts[0], NULL, &c), COLL_OK, "");
  BAD(coll_comm_abort_handle(c, NULL), "abort_handle");
  coll_comm_destroy(c);
  BAD(coll_abort(NULL), "abort");
  CHECK(coll_is_aborted(NULL) == 0);
  coll_abort_handle_release(NULL);
}

/* A config whose INIT macro was forgotten: garbage where the macro puts the
 * size, or the right size but garbage where it puts the magic. Every entry
 * point that takes a config refuses it, naming the macro; the layouts of
 * older headers (their exact sizes, no magic) still work. */
static void forgotten_init(void) {
  coll_transport_t *ts[1];
  coll_comm_t *c = NULL;
  coll_group_t *g = NULL;
  coll_comm_config_t junk;
  coll_tcp_config_t tjunk;
  coll_transport_t *t = NULL;
  coll_unique_id_t id;
  int dev = 0;
  static const size_t old_sizes[] = {offsetof(coll_comm_config_t, name),
                                     offsetof(coll_comm_config_t, abort_handle),
                                     offsetof(coll_comm_config_t, magic)};
  size_t i;
  memset(&id, 0, sizeof id);
  memset(&junk, 0xA5, sizeof junk);
  EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
  BAD(coll_comm_create(ts[0], &junk, &c), "COLL_COMM_CONFIG_INIT");
  CHECK(c == NULL);
  junk.size = sizeof junk;
  junk.timeout_ms = 1000;
  EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
  BAD(coll_comm_create(ts[0], &junk, &c), "COLL_COMM_CONFIG_INIT");
  junk.size = offsetof(coll_comm_config_t, name) + 1; /* no layout's size */
  EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
  BAD(coll_comm_create(ts[0], &junk, &c), "COLL_COMM_CONFIG_INIT");
  junk.size = sizeof junk;
  BAD(coll_comm_init_env(&junk, &c), "COLL_COMM_CONFIG_INIT");
  /* A build without the NCCL backend says so first. */
  if (coll_unique_id_create(NULL) != COLL_ERR_NOT_AVAILABLE ||
      strstr(coll_last_error(), "built without") == NULL) {
    BAD(coll_comm_init_rank(0, 1, &id, &junk, &c), "COLL_COMM_CONFIG_INIT");
    BAD(coll_group_create_config(&dev, 1, &junk, &g), "COLL_COMM_CONFIG_INIT");
  }
  CHECK(c == NULL && g == NULL);
  /* Older layouts: exact sizes, what lies past them is never read. */
  for (i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; i++) {
    memset(&junk, 0xA5, sizeof junk);
    junk.size = old_sizes[i];
    junk.timeout_ms = SHORT_TIMEOUT_MS;
    if (old_sizes[i] > offsetof(coll_comm_config_t, name)) junk.name = "old";
    if (old_sizes[i] > offsetof(coll_comm_config_t, abort_handle))
      junk.abort_handle = NULL;
    EXPECT(coll_inproc_create(1, ts), COLL_OK, "");
    EXPECT(coll_comm_create(ts[0], &junk, &c), COLL_OK, "");
    EXPECT(coll_comm_destroy(c), COLL_OK, "");
    c = NULL;
  }
  /* The TCP config: refused before any rendezvous. */
  memset(&tjunk, 0xA5, sizeof tjunk);
  BAD(coll_tcp_create(&tjunk, &t), "COLL_TCP_CONFIG_INIT");
  tjunk.size = sizeof tjunk;
  tjunk.rank = 0;
  tjunk.world = 1;
  tjunk.master_addr = "127.0.0.1";
  tjunk.master_port = 29999;
  BAD(coll_tcp_create(&tjunk, &t), "COLL_TCP_CONFIG_INIT");
  CHECK(t == NULL);
}

/* NCCL entry points on a machine without NCCL or a GPU, and the TCP and
 * environment bootstraps with arguments they must refuse before any I/O. */
static void backend_args(void) {
  coll_unique_id_t id;
  coll_comm_t *c = NULL;
  coll_group_t *g = NULL;
  coll_transport_t *t = NULL;
  coll_comm_t *comms[2];
  float buf[4];
  void *bufs[1] = {buf};
  int dev = 0;
  coll_tcp_config_t tcfg = COLL_TCP_CONFIG_INIT;
  memset(&id, 0, sizeof id);
  REFUSED(coll_unique_id_create(NULL));
  REFUSED(coll_comm_init_rank(0, 1, NULL, NULL, &c));
  REFUSED(coll_comm_init_rank(-1, 1, &id, NULL, &c));
  REFUSED(coll_comm_init_rank(0, 1, &id, NULL, NULL));
  REFUSED(coll_group_create(NULL, 1, &g));
  REFUSED(coll_group_create(&dev, 0, &g));
  REFUSED(coll_group_create(&dev, 1, NULL));
  REFUSED(coll_group_allreduce(NULL, bufs, 1, 4, COLL_F32, COLL_SUM, NULL, 0));
  REFUSED(coll_group_broadcast(NULL, bufs, 1, 4, COLL_F32, 0, NULL, 0));
  REFUSED(coll_group_split(NULL, comms));
  /* TCP: refused before any rendezvous. */
  BAD(coll_tcp_create(NULL, &t), "tcp");
  tcfg.rank = 0;
  tcfg.world = 2;
  tcfg.master_addr = "127.0.0.1";
  tcfg.master_port = 29999;
  BAD(coll_tcp_create(&tcfg, NULL), "tcp");
  tcfg.rank = -1;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  tcfg.rank = 2;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  tcfg.rank = 0;
  tcfg.world = 0;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  tcfg.world = 2;
  tcfg.master_port = 0;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  tcfg.master_port = 70000;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  tcfg.master_port = 29999;
  tcfg.size = 0;
  BAD(coll_tcp_create(&tcfg, &t), "tcp");
  /* env:// without the environment it needs. */
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
  {
    coll_status_t s = coll_comm_init_env(NULL, &c);
    if (s == COLL_OK) {
      t_fail(&g_fails, "coll_comm_init_env without RANK/WORLD_SIZE succeeded");
      coll_comm_destroy(c);
    } else if (coll_last_error()[0] == '\0') {
      t_fail(&g_fails, "coll_comm_init_env failed (%s) without a text",
             coll_status_name(s));
    }
  }
  BAD(coll_comm_init_env(NULL, NULL), "init_env");
}

static void handles_rank(int rank, int world, void *arg) {
  (void)rank, (void)world, (void)arg;
  transport_args();
  comm_args();
  forgotten_init();
  backend_args();
}

static void test_handles_and_transports(void **state) {
  (void)state;
  bi_begin();
  /* On a thread of its own, so that a call that wrongly blocks is a
   * bounded failure. */
  test_run_ranks(1, handles_rank, NULL, RUN_TIMEOUT_MS,
                 "comm/transport argument checks");
  bi_end("comms, handles, transports");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handles_and_transports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
