/* SPDX-License-Identifier: Apache-2.0 */
/* test_kv.c: the in-memory store behind coll_store_ops_t for tests: a
 * mutex, a condition variable every set broadcasts, a small array. */
#include "test_kv.h"

#include "bootstrap/rendezvous/setup_check.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KV_MAX 256
#define KV_KEY_MAX 160

struct test_kv {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;
  char keys[KV_MAX][KV_KEY_MAX];
  void *vals[KV_MAX];
  size_t lens[KV_MAX];
};

test_kv_t *test_kv_new(void) {
  test_kv_t *kv = calloc(1, sizeof *kv);
  pthread_condattr_t ca;
  if (kv == NULL) return NULL;
  pthread_mutex_init(&kv->mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&kv->cv, &ca);
  pthread_condattr_destroy(&ca);
  return kv;
}

void test_kv_free(test_kv_t *kv) {
  int i;
  if (kv == NULL) return;
  for (i = 0; i < kv->n; i++) free(kv->vals[i]);
  pthread_cond_destroy(&kv->cv);
  pthread_mutex_destroy(&kv->mu);
  free(kv);
}

/* Lock held. */
static int find(const test_kv_t *kv, const char *key) {
  int i;
  for (i = 0; i < kv->n; i++)
    if (strcmp(kv->keys[i], key) == 0) return i;
  return -1;
}

/* Returns 0, or -1 when the store is full or the key too long. */
static int put(test_kv_t *kv, const char *key, const void *value, size_t len) {
  void *copy = malloc(len > 0 ? len : 1);
  int i, r = 0;
  if (copy == NULL || strlen(key) >= KV_KEY_MAX) {
    free(copy);
    return -1;
  }
  if (len > 0) memcpy(copy, value, len);
  pthread_mutex_lock(&kv->mu);
  i = find(kv, key);
  if (i < 0 && kv->n < KV_MAX) {
    i = kv->n++;
    snprintf(kv->keys[i], KV_KEY_MAX, "%s", key);
    kv->vals[i] = NULL;
  }
  if (i < 0) {
    r = -1;
    free(copy);
  } else {
    free(kv->vals[i]);
    kv->vals[i] = copy;
    kv->lens[i] = len;
    pthread_cond_broadcast(&kv->cv);
  }
  pthread_mutex_unlock(&kv->mu);
  return r;
}

void test_kv_put(test_kv_t *kv, const char *key, const void *value,
                 size_t len) {
  if (put(kv, key, value, len) != 0) {
    fprintf(stderr, "test_kv_put: store full or key too long: %s\n", key);
    abort();
  }
}

void test_kv_plant_peers(test_kv_t *kv, int rank, int world, int ok) {
  char key[64], text[256];
  int q;
  for (q = 0; q < world; q++) {
    if (q == rank) continue;
    snprintf(key, sizeof key, "coll/compat/%d", q);
    coll__rdv_compat_text(q, text, sizeof text);
    test_kv_put(kv, key, text, strlen(text));
    snprintf(key, sizeof key, "coll/outcome/%d", q);
    if (ok) test_kv_put(kv, key, "ok", 2);
  }
}

int test_kv_peek(test_kv_t *kv, const char *key, char *buf, size_t cap) {
  int i;
  size_t n;
  pthread_mutex_lock(&kv->mu);
  i = find(kv, key);
  if (i >= 0) {
    n = kv->lens[i] < cap - 1 ? kv->lens[i] : cap - 1;
    memcpy(buf, kv->vals[i], n);
    buf[n] = '\0';
  }
  pthread_mutex_unlock(&kv->mu);
  return i >= 0;
}

int test_kv_count(test_kv_t *kv) {
  int n;
  pthread_mutex_lock(&kv->mu);
  n = kv->n;
  pthread_mutex_unlock(&kv->mu);
  return n;
}

static void full_key(const test_kv_view_t *v, const char *key, char *out) {
  snprintf(out, KV_KEY_MAX, "%s%s", v->prefix ? v->prefix : "", key);
}

static coll_status_t failed(const test_kv_view_t *v, coll_status_t s) {
  if (v->fail_text != NULL) return coll_set_last_error(s, "%s", v->fail_text);
  return s;
}

/* 1 when the view's failure knobs apply to key. */
static int targeted(const test_kv_view_t *v, const char *key) {
  return v->only == NULL || strstr(key, v->only) != NULL;
}

static coll_status_t kv_set(void *ctx, const char *key, const void *value,
                            size_t len) {
  test_kv_view_t *v = ctx;
  char k[KV_KEY_MAX];
  if (v->fail_set != COLL_OK && targeted(v, key)) return failed(v, v->fail_set);
  full_key(v, key, k);
  if (put(v->kv, k, value, len) != 0)
    return coll_set_last_error(COLL_ERR_NO_MEMORY, "test store full");
  return COLL_OK;
}

static coll_status_t kv_get(void *ctx, const char *key, void *value, size_t cap,
                            size_t *len, int64_t timeout_ms) {
  test_kv_view_t *v = ctx;
  test_kv_t *kv = v->kv;
  struct timespec dl;
  char k[KV_KEY_MAX];
  int i, rc = 0, hit = targeted(v, key);
  if (v->fail_get != COLL_OK && hit) return failed(v, v->fail_get);
  if (timeout_ms == 0) v->zero_gets++;
  if (timeout_ms == 0 && v->fail_probe != COLL_OK && hit)
    return failed(v, v->fail_probe);
  if (timeout_ms != 0 && v->late && hit)
    return coll_set_last_error(COLL_ERR_TIMEOUT, "test store: late");
  full_key(v, key, k);
  clock_gettime(CLOCK_MONOTONIC, &dl);
  if (timeout_ms > 0) {
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
      dl.tv_sec++;
      dl.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&kv->mu);
  while ((i = find(kv, k)) < 0 && timeout_ms != 0 && rc != ETIMEDOUT)
    rc = timeout_ms < 0 ? pthread_cond_wait(&kv->cv, &kv->mu)
                        : pthread_cond_timedwait(&kv->cv, &kv->mu, &dl);
  if (i >= 0) {
    size_t n = kv->lens[i] < cap ? kv->lens[i] : cap;
    if (n > 0) memcpy(value, kv->vals[i], n);
    if (!v->forget_len || !hit) *len = kv->lens[i];
  }
  pthread_mutex_unlock(&kv->mu);
  if (i < 0)
    return coll_set_last_error(COLL_ERR_TIMEOUT, "test store: no key %s", k);
  return COLL_OK;
}

void test_kv_ops(test_kv_view_t *v, coll_store_ops_t *ops) {
  ops->size = sizeof *ops;
  ops->ctx = v;
  ops->set = kv_set;
  ops->get = kv_get;
}
