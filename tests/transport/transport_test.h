/* SPDX-License-Identifier: Apache-2.0 */
/* transport_test.h: helpers the transport tests share: per-rank failure
 * records (rank threads never call cmocka asserts), bounded waits, and a
 * data pattern each message can be checked against. */
#ifndef COLL_TESTS_TRANSPORT_TEST_H
#define COLL_TESTS_TRANSPORT_TEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "test_util.h"
#include "transport/transport.h"

#define TT_MAX_RANKS 8
/* Bound of every wait inside a rank thread; a hang past it is a failure. */
#define TT_WAIT_MS 20000
/* Bound of test_run_ranks around every group of rank threads. */
#define TT_RUN_MS 60000

/* What one rank thread saw: its first failure, in words. */
typedef struct tt_result {
  int failed;
  char msg[256];
} tt_result_t;

static inline void tt_fail(tt_result_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void tt_fail(tt_result_t *r, const char *fmt, ...) {
  va_list ap;
  if (r->failed++ > 0) return;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
}

/* The test thread's check of n rank records; needs cmocka.h first. */
#define TT_ASSERT_RANKS_OK(res, n)                        \
  do {                                                    \
    int tt_i_;                                            \
    for (tt_i_ = 0; tt_i_ < (n); tt_i_++)                 \
      if ((res)[tt_i_].failed)                            \
        fail_msg("rank %d: %s", tt_i_, (res)[tt_i_].msg); \
  } while (0)

/* Waits on a request through the provider slot (relative timeout). */
static inline coll_status_t tt_wait(coll_transport_t *t, void *req,
                                    int64_t timeout_ms, size_t *len) {
  size_t dummy;
  return coll__t_wait_for(t, req, timeout_ms, len ? len : &dummy);
}

/* Posts and waits (bounded); the status of whichever step failed. */
static inline coll_status_t tt_send(coll_transport_t *t, int peer, uint32_t tag,
                                    const void *buf, size_t len) {
  void *r;
  coll_status_t s = coll__t_isend(t, peer, tag, buf, len, &r);
  return s != COLL_OK ? s : tt_wait(t, r, TT_WAIT_MS, NULL);
}

static inline coll_status_t tt_recv(coll_transport_t *t, int peer, uint32_t tag,
                                    void *buf, size_t cap, size_t *len) {
  void *r;
  coll_status_t s = coll__t_irecv(t, peer, tag, buf, cap, &r);
  return s != COLL_OK ? s : tt_wait(t, r, TT_WAIT_MS, len);
}

/* Word j of the message identified by `seed`; bytes go by 8-byte words so
 * that large buffers stay cheap to check under the sanitizers. */
static inline uint64_t tt_word(uint64_t seed, size_t j) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + j * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

static inline void tt_fill(void *buf, size_t len, uint64_t seed) {
  uint8_t *p = buf;
  size_t j, n = len / 8;
  uint64_t w;
  for (j = 0; j < n; j++) {
    w = tt_word(seed, j);
    memcpy(p + 8 * j, &w, 8);
  }
  w = tt_word(seed, n);
  if (len % 8) memcpy(p + 8 * n, &w, len % 8);
}

/* 1 when buf holds exactly the pattern of `seed` for len bytes. */
static inline int tt_check(const void *buf, size_t len, uint64_t seed) {
  const uint8_t *p = buf;
  size_t j, n = len / 8;
  uint64_t w, v;
  for (j = 0; j < n; j++) {
    w = tt_word(seed, j);
    memcpy(&v, p + 8 * j, 8);
    if (v != w) return 0;
  }
  w = tt_word(seed, n);
  return len % 8 == 0 || memcmp(p + 8 * n, &w, len % 8) == 0;
}

/* 1 when every byte of buf[0..len) is b. */
static inline int tt_all(const void *buf, size_t len, uint8_t b) {
  const uint8_t *p = buf;
  size_t i;
  for (i = 0; i < len; i++)
    if (p[i] != b) return 0;
  return 1;
}

/* Destroys the endpoints of an in-process world (NULL entries skipped). */
static inline void tt_destroy_all(coll_transport_t **t, int n) {
  int i;
  for (i = 0; i < n; i++) {
    coll_transport_destroy(t[i]);
    t[i] = NULL;
  }
}

#endif
