/* SPDX-License-Identifier: Apache-2.0 */
/* fault_rank.c: a rank process of a fault job: it makes its comm as a
 * launcher's rank does (or through the helper's store), streams checked
 * allreduces, may be late to the fault's one, and keeps a watchdog thread
 * that aborts its comm or turns its bytes to garbage when the parent says
 * so. It records what it saw in the shared region; it never asserts. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/rendezvous/host_id.h"
#include "bootstrap/store/store.h"
#include "coll.h"
#include "core/comm.h"
#include "cpu/cpu.h"
#include "fault_int.h"
#include "transport/endpoint.h"
#include "transport/route/route.h"
#include "transport/shm/shm_int.h"

/* Two hosts for the two-level path: even ranks on one, odd on the other. */
static const char *const k_hosts[FJ_MAXW] = {
    "A/net:1/ipc:1", "B/net:2/ipc:2", "A/net:1/ipc:1", "B/net:2/ipc:2",
    "A/net:1/ipc:1", "B/net:2/ipc:2", "A/net:1/ipc:1", "B/net:2/ipc:2"};

int64_t fj_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fj_sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void note(fj_rank_out_t *o, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(fj_rank_out_t *o, int status, const char *fmt, ...) {
  va_list ap;
  if (o->status != 0) return;
  o->status = status;
  va_start(ap, fmt);
  vsnprintf(o->text, sizeof o->text, fmt, ap);
  va_end(ap);
}

/* ---- meeting ------------------------------------------------------------ */

static void set_env(const fj_shared_t *sh, int rank) {
  const fj_spec_t *s = &sh->spec;
  char v[32];
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  snprintf(v, sizeof v, "%d", s->world);
  setenv("WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", sh->port);
  setenv("MASTER_PORT", v, 1);
  setenv("COLL_BACKEND", "cpu", 1);
  snprintf(v, sizeof v, "%lld", (long long)s->timeout_ms);
  setenv("COLL_TIMEOUT_MS", v, 1);
  if (s->hb_ms >= 0) {
    snprintf(v, sizeof v, "%lld", (long long)s->hb_ms);
    setenv("COLL_HEARTBEAT_TIMEOUT_MS", v, 1);
  } else {
    unsetenv("COLL_HEARTBEAT_TIMEOUT_MS");
  }
  if (s->path == FJ_TCP)
    setenv("COLL_TRANSPORT", "tcp", 1);
  else
    unsetenv("COLL_TRANSPORT");
  setenv("COLL_LINK_PROBE", "0", 1);
  unsetenv("COLL_AUTH_TOKEN");
  unsetenv("COLL_ALGO");
  /* Every survivor warns of the failure it saw: thousands of lines in a
   * soak. FJ_VERBOSE=1 keeps them. */
  if (getenv("FJ_VERBOSE") == NULL) setenv("COLL_DEBUG", "NONE", 1);
  if (s->path == FJ_ROUTE)
    coll__host_id_test_hook =
        (coll_host_id_test_hook_t){-1, NULL, k_hosts, FJ_MAXW};
}

/* The store of rank proxy_hi: a get of proxy_lo's address points the
 * proxy at it and answers with the proxy's own, so that rank dials the
 * proxy (the higher rank of a pair dials). */
typedef struct wrap {
  coll_store_ops_t inner;
  fj_shared_t *sh;
} wrap_t;

static coll_status_t wrap_set(void *ctx, const char *key, const void *value,
                              size_t len) {
  wrap_t *w = ctx;
  return w->inner.set(w->inner.ctx, key, value, len);
}

static coll_status_t wrap_get(void *ctx, const char *key, void *value,
                              size_t cap, size_t *len, int64_t timeout_ms) {
  wrap_t *w = ctx;
  char want[64], real[96];
  size_t n = 0;
  coll_status_t s;
  snprintf(want, sizeof want, "coll/addr/%d", w->sh->spec.proxy_lo);
  if (strcmp(key, want) != 0)
    return w->inner.get(w->inner.ctx, key, value, cap, len, timeout_ms);
  s = w->inner.get(w->inner.ctx, key, real, sizeof real - 1, &n, timeout_ms);
  if (s != COLL_OK) return s;
  real[n < sizeof real ? n : sizeof real - 1] = '\0';
  if (fj_helper_call(w->sh, FJ_HELP_TARGET, 0, real) != 0)
    return coll_set_last_error(COLL_ERR_INTERNAL, "the proxy took no target");
  n = strlen(w->sh->proxy_addr);
  memcpy(value, w->sh->proxy_addr, n < cap ? n : cap);
  *len = n;
  return COLL_OK;
}

static coll_status_t meet(fj_shared_t *sh, int rank, coll_comm_t **c) {
  const fj_spec_t *s = &sh->spec;
  coll_comm_config_t cfg = COLL_COMM_CONFIG_INIT;
  coll_store_t *st = NULL;
  wrap_t w;
  coll_store_ops_t ops;
  coll_status_t rc;
  cfg.timeout_ms = s->timeout_ms;
  if (!s->proxy) return coll_comm_init_env(&cfg, c);
  rc = coll__store_connect("127.0.0.1", sh->port, NULL, 20000, &st);
  if (rc != COLL_OK) return rc;
  coll__store_client_ops(st, &w.inner);
  w.sh = sh;
  if (rank == s->proxy_hi) {
    ops = (coll_store_ops_t){sizeof ops, &w, wrap_set, wrap_get};
  } else {
    ops = w.inner;
  }
  rc = coll_comm_init_store(&ops, rank, s->world, &cfg, c);
  coll__store_close(st);
  return rc;
}

/* ---- the watchdog ---------------------------------------------------------
 */

typedef struct dog {
  fj_shared_t *sh;
  int rank;
  coll_comm_t *c;
  coll_abort_handle_t *h;
  pthread_t th;
} dog_t;

/* The shared-memory endpoint carrying this rank's messages to a peer of
 * its host, or NULL. */
static shm_ep_t *shm_of(coll_comm_t *c) {
  coll_transport_t *t = ((coll_cpu_t *)c->be)->t, *h = coll__route_host(t);
  if (h != NULL) t = h;
  return strcmp(coll__t_name(t), "shm") == 0 ? t->ctx : NULL;
}

/* Garbage in shared memory: this rank's ring into the next member's
 * region claims more cells than the ring holds, as a rank whose memory
 * went bad would. */
static void shm_garbage(coll_comm_t *c) {
  shm_ep_t *ep = shm_of(c);
  shm_peer_t *pr;
  uint64_t tail;
  if (ep == NULL || ep->world < 2) return;
  pr = &ep->peers[(ep->rank + 1) % ep->world];
  pthread_mutex_lock(&ep->mu);
  tail = atomic_load_explicit(&pr->tx->tail, memory_order_relaxed);
  atomic_store_explicit(&pr->tx->tail, tail + ep->lay.cells + 7,
                        memory_order_release);
  pthread_mutex_unlock(&ep->mu);
  coll__shm_ring_bell(ep, (ep->rank + 1) % ep->world);
}

static void *dog_main(void *p) {
  dog_t *d = p;
  for (;;) {
    int cmd;
    while (sem_wait(&d->sh->cmd_sem[d->rank]) != 0 && errno == EINTR) {
    }
    cmd = atomic_exchange(&d->sh->cmd[d->rank], FJ_CMD_NONE);
    if (cmd == FJ_CMD_QUIT) return NULL;
    if (cmd == FJ_CMD_ABORT) coll_abort(d->h);
    if (cmd == FJ_CMD_GARBAGE) shm_garbage(d->c);
  }
}

static void dog_stop(dog_t *d) {
  atomic_store(&d->sh->cmd[d->rank], FJ_CMD_QUIT);
  sem_post(&d->sh->cmd_sem[d->rank]);
  pthread_join(d->th, NULL);
  coll_abort_handle_release(d->h);
}

/* ---- the stream -----------------------------------------------------------
 */

/* Allreduce k of rank r: small integers, so every sum is exact in f32.
 * The element after the count is the stream's flag: 1 where this rank was
 * asked to end the stream. */
static void fill(float *buf, size_t n, int rank, int k, int stop) {
  float m = (float)((rank + 1) * (k % 7 + 1));
  for (size_t i = 0; i < n; i++) buf[i] = m + (float)(i % 5);
  buf[n] = stop ? 1.0f : 0.0f;
}

/* 1 if the sums are wrong (the flag's sum, too, must be a count of
 * ranks). */
static int wrong(const float *buf, size_t n, int world, int k) {
  float base = (float)((k % 7 + 1) * world * (world + 1) / 2);
  for (size_t i = 0; i < n; i++)
    if (buf[i] != base + (float)(world * (int)(i % 5))) return 1;
  return buf[n] < 0.0f || buf[n] > (float)world || buf[n] != (float)(int)buf[n];
}

/* The late rank stays in its own code until the parent lets it in. */
static void be_late(fj_shared_t *sh) {
  int64_t end = fj_now_ms() + sh->spec.late_ms;
  while (!atomic_load(&sh->release) && fj_now_ms() < end) fj_sleep_ms(1);
}

static void stream(fj_shared_t *sh, int rank, coll_comm_t *c, float *buf) {
  const fj_spec_t *s = &sh->spec;
  fj_rank_out_t *o = &sh->out[rank];
  int fault_at = s->before + 1;
  for (int k = 1; s->after == FJ_STREAM || k <= fault_at + s->after; k++) {
    int64_t t0, t1;
    coll_status_t st;
    if (k == fault_at && rank == s->late) be_late(sh);
    fill(buf, s->count, rank, k, atomic_load(&sh->stream_stop));
    t0 = fj_now_ms();
    atomic_store(&sh->reached[rank], k);
    st = coll_allreduce(c, buf, buf, s->count + 1, COLL_F32, COLL_SUM, NULL);
    t1 = fj_now_ms();
    if (k == fault_at || st != COLL_OK) {
      o->enter_ms = t0;
      o->end_ms = t1;
    }
    if (st != COLL_OK) {
      o->failed_at = k;
      note(o, (int)st, "%s", coll_last_error());
      return;
    }
    o->ok_calls++;
    if (wrong(buf, s->count, s->world, k)) {
      o->wrong++;
      return; /* the flag may be wrong too: the ranks cannot agree */
    }
    /* Every rank sees the same sum: they end the stream together. A job
     * of a fixed count runs it whole, however slow the machine. */
    if (s->after == FJ_STREAM && k > fault_at && buf[s->count] > 0.0f) return;
  }
}

int fj_rank_main(fj_shared_t *sh, int rank) {
  const fj_spec_t *s = &sh->spec;
  fj_rank_out_t *o = &sh->out[rank];
  dog_t d = {sh, rank, NULL, NULL, 0};
  float *buf = malloc((s->count + 1) * sizeof *buf);
  coll_status_t st;
  int64_t end;
  if (buf == NULL) return 3;
  set_env(sh, rank);
  st = meet(sh, rank, &d.c);
  if (st != COLL_OK) {
    note(o, (int)st, "comm: %s", coll_last_error());
    atomic_store(&sh->done[rank], 1);
    free(buf);
    return 2;
  }
  o->up = 1;
  atomic_store(&sh->up[rank], 1);
  if (coll_comm_abort_handle(d.c, &d.h) != COLL_OK ||
      pthread_create(&d.th, NULL, dog_main, &d) != 0) {
    note(o, COLL_ERR_INTERNAL, "watchdog: %s", coll_last_error());
    atomic_store(&sh->done[rank], 1);
    coll_comm_destroy(d.c);
    free(buf);
    return 2;
  }
  stream(sh, rank, d.c, buf);
  atomic_store(&sh->done[rank], 1);
  /* The comm stays until every rank ended: a comm destroyed here would
   * end what another rank still waits on. */
  end = fj_now_ms() + s->bound_ms + 60000;
  while (!atomic_load(&sh->end) && fj_now_ms() < end) fj_sleep_ms(2);
  dog_stop(&d);
  coll_comm_destroy(d.c);
  free(buf);
  return 0;
}
