/* SPDX-License-Identifier: Apache-2.0 */
/* test_store_caps.c: the store holds at most what its job needs, with or
 * without a token: a stranger pushing far more than the cap is refused
 * past it with a text that names the cap, and the serving process's
 * memory stays flat; the key and client caps likewise; and a refused
 * client can still be told apart from the ranks that are served. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "boot_test.h"
#include "core/error.h"
#include "store_push.h"
#include "test_util.h"

#define T_MS 10000
/* What the stranger offers: far past the cap of a job of 4 ranks, small
 * enough to take a second or two. */
#define PUSH_MIB 64
/* The serving process may grow by this much at most while it refuses. */
#define GROWTH_MAX_KIB (16 * 1024)

typedef struct pushed {
  store_push_report_t rep;
  int rc;
} pushed_t;

typedef struct push_arg {
  pushed_t *out; /* shared with the parent */
  int port;
  const char *token;
} push_arg_t;

static int push_child(void *p) {
  push_arg_t *a = p;
  a->out->rc =
      store_push("127.0.0.1", a->port, a->token, (uint64_t)PUSH_MIB << 20,
                 COLL_STORE_VALUE_MAX, "push/", 60000, &a->out->rep);
  return 0;
}

/* A stranger (a forked process) pushes PUSH_MIB MiB into a store served
 * here for a job of 4 ranks; returns what it saw, and checks this
 * process's memory. */
static void push_into(const char *token, pushed_t *res) {
  coll_store_server_t *srv = NULL;
  coll_store_caps_t caps;
  coll_store_stats_t st;
  pushed_t *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int64_t rss0, peak0, rss1, peak1;
  push_arg_t a;
  pid_t pid;
  assert_true(shared != MAP_FAILED);
  memset(shared, 0, sizeof *shared);
  assert_int_equal(coll__store_server_start_for("127.0.0.1", 0, token, 4, &srv),
                   COLL_OK);
  coll__store_caps_for(4, &caps);
  assert_int_equal(store_push_rss_kib(0, &rss0, &peak0), 0);
  a = (push_arg_t){shared, coll__store_server_port(srv), token};
  pid = bt_fork(push_child, &a);
  assert_true(pid > 0);
  assert_int_equal(bt_wait_child(pid, 90000), 0);
  assert_int_equal(store_push_rss_kib(0, &rss1, &peak1), 0);
  coll__store_server_stats(srv, &st);
  coll__store_server_stop(srv);
  *res = *shared;
  munmap(shared, sizeof *shared);
  printf(
      "pushed %llu MiB in %.2f s: %.2f MiB stored (cap %.2f MiB), %llu "
      "refused; RSS %lld -> %lld KiB (peak %lld)\n",
      (unsigned long long)(res->rep.offered >> 20),
      res->rep.elapsed_ms / 1000.0, res->rep.stored / 1048576.0,
      caps.bytes / 1048576.0, (unsigned long long)res->rep.refused,
      (long long)rss0, (long long)rss1, (long long)peak1);
  printf("first refusal: %s\n", res->rep.first_refusal);
  if (res->rc != 0) fail_msg("the push did not run: %s", res->rep.failure);
  assert_true(res->rep.offered >= (uint64_t)PUSH_MIB << 20);
  assert_true(res->rep.stored > 0);
  assert_true(res->rep.stored <= caps.bytes);
  /* Everything past the cap was refused, each SET on its own. */
  assert_true(
      res->rep.refused >=
      ((((uint64_t)PUSH_MIB << 20) - caps.bytes) / COLL_STORE_VALUE_MAX) - 1);
  assert_true(st.full >= res->rep.refused);
  if (store_push_sanitized())
    printf(
        "a sanitizer build: its allocator keeps freed memory, so the "
        "growth is not judged\n");
  else if (rss1 - rss0 >= GROWTH_MAX_KIB)
    fail_msg("the serving process grew by %lld KiB", (long long)(rss1 - rss0));
}

/* Without a token the refusal says who can write to the store. */
static void test_push_without_token(void **state) {
  pushed_t r;
  (void)state;
  push_into(NULL, &r);
  bt_must_contain(r.rep.first_refusal, "the store is full: it holds ");
  bt_must_contain(r.rep.first_refusal, "its cap for a job of 4 ranks");
  bt_must_contain(r.rep.first_refusal,
                  "without a token (COLL_AUTH_TOKEN) anyone who reaches the "
                  "store can write to it");
}

/* With a token the caps hold as well (a rank itself may misbehave). */
static void test_push_with_token(void **state) {
  pushed_t r;
  (void)state;
  push_into("push-token", &r);
  bt_must_contain(r.rep.first_refusal, "the store is full: it holds ");
  bt_must_not_contain(r.rep.first_refusal, "without a token");
}

/* Tiny values under many keys meet the key cap; overwriting a key that
 * exists still works at the cap, and a new one does not. */
static void test_key_cap(void **state) {
  coll_store_server_t *srv = NULL;
  coll_store_t *st = NULL;
  coll_store_caps_t caps;
  char key[32];
  size_t i;
  (void)state;
  coll__store_caps_for(1, &caps);
  assert_int_equal(coll__store_server_start_for("127.0.0.1", 0, NULL, 1, &srv),
                   COLL_OK);
  assert_int_equal(
      coll__store_connect("127.0.0.1", coll__store_server_port(srv), NULL, T_MS,
                          &st),
      COLL_OK);
  for (i = 0; i < caps.keys; i++) {
    snprintf(key, sizeof key, "k/%zu", i);
    if (coll__store_set(st, key, "v", 1) != COLL_OK)
      fail_msg("key %zu of %zu: %s", i, caps.keys, coll_last_error());
  }
  assert_int_equal(coll__store_set(st, "k/0", "w", 1), COLL_OK);
  assert_int_equal(coll__store_set(st, "one-more", "v", 1), COLL_ERR_PROTOCOL);
  bt_must_contain(coll_last_error(),
                  "the store is full: it holds 96 keys, "
                  "its cap for a job of 1 rank;");
  coll__store_close(st);
  coll__store_server_stop(srv);
}

/* Clients past the cap are refused at their HELLO; one that leaves makes
 * room for another. */
static void test_client_cap(void **state) {
  coll_store_server_t *srv = NULL;
  coll_store_t **st;
  coll_store_caps_t caps;
  coll_store_t *extra = NULL;
  int64_t until;
  int port, i;
  (void)state;
  coll__store_caps_for(1, &caps);
  st = calloc((size_t)caps.clients, sizeof *st);
  assert_non_null(st);
  assert_int_equal(coll__store_server_start_for("127.0.0.1", 0, NULL, 1, &srv),
                   COLL_OK);
  port = coll__store_server_port(srv);
  for (i = 0; i < caps.clients; i++)
    if (coll__store_connect("127.0.0.1", port, NULL, T_MS, &st[i]) != COLL_OK)
      fail_msg("client %d of %d: %s", i, caps.clients, coll_last_error());
  assert_int_equal(coll__store_connect("127.0.0.1", port, NULL, T_MS, &extra),
                   COLL_ERR_PROTOCOL);
  bt_must_contain(coll_last_error(),
                  "the store is full: 34 clients are connected, its cap for "
                  "a job of 1 rank;");
  coll__store_close(st[0]);
  st[0] = NULL;
  /* The server notices the close on its own thread. */
  until = test_now_ms() + T_MS;
  while (coll__store_connect("127.0.0.1", port, NULL, T_MS, &extra) !=
         COLL_OK) {
    if (test_now_ms() > until) fail_msg("no room after a client left");
    test_sleep_ms(20);
  }
  assert_int_equal(coll__store_set(extra, "in", "v", 1), COLL_OK);
  coll__store_close(extra);
  for (i = 0; i < caps.clients; i++) coll__store_close(st[i]);
  free(st);
  coll__store_server_stop(srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_push_without_token),
      cmocka_unit_test(test_push_with_token),
      cmocka_unit_test(test_key_cap),
      cmocka_unit_test(test_client_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
