/* SPDX-License-Identifier: Apache-2.0 */
/* store_push.h: a stranger that pushes values into a rendezvous store, for
 * the tests of the store's caps and for the store_push tool: full-size
 * values under fresh keys, reconnecting whenever the store refuses one, so
 * every byte it offers is either stored or refused. */
#ifndef COLL_TEST_STORE_PUSH_H
#define COLL_TEST_STORE_PUSH_H

#include <stddef.h>
#include <stdint.h>

typedef struct store_push_report {
  uint64_t offered;        /* bytes of values sent in SET requests */
  uint64_t stored;         /* bytes of values the store accepted */
  uint64_t keys;           /* values accepted */
  uint64_t refused;        /* SETs refused (or connections refused) */
  uint64_t connects;       /* connections made */
  int64_t elapsed_ms;      /* the whole push */
  char first_refusal[512]; /* the store's text, the first time */
  char failure[512];       /* why the push ended early, "" when it did not */
} store_push_report_t;

/* Pushes `bytes` bytes of values of `value_len` bytes each (1 to the
 * store's value cap) under keys "<prefix><n>" to the store at host:port,
 * as a client with `token` (NULL: none), giving up after timeout_ms.
 * Fills *out; returns 0 when every byte was offered, -1 when the push
 * ended early (a connect failed other than by a refusal, or time ran
 * out: out->failure says why). Any thread. */
int store_push(const char *host, int port, const char *token, uint64_t bytes,
               size_t value_len, const char *prefix, int64_t timeout_ms,
               store_push_report_t *out);

/* 1 when this build runs under AddressSanitizer or ThreadSanitizer, whose
 * allocators keep freed memory (a quarantine, caches) and so make a
 * process's resident set say nothing about what it holds. */
int store_push_sanitized(void);

/* This process's resident set (VmRSS) and its peak (VmHWM), in KiB, from
 * /proc/<pid>/status (pid 0: this process). 0, or -1 when unreadable. */
int store_push_rss_kib(int pid, int64_t *rss, int64_t *peak);

#endif
