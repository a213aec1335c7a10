/* SPDX-License-Identifier: Apache-2.0 */
/* store_push.c: a stranger pushing values into a rendezvous store. */
#include "store_push.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store.h"
#include "core/clock.h"
#include "core/error.h"

/* Connects (a refusal of the connection itself counts as a refused
 * value); 1 connected, 0 refused, -1 failed. */
static int push_connect(const char *host, int port, const char *token,
                        int64_t deadline, size_t value_len,
                        store_push_report_t *out, coll_store_t **st) {
  coll_status_t s;
  *st = NULL;
  s = coll__store_connect(host, port, token, coll__remaining_ms(deadline), st);
  if (s == COLL_OK) {
    out->connects++;
    return 1;
  }
  if (s != COLL_ERR_PROTOCOL) {
    snprintf(out->failure, sizeof out->failure, "connect: %s: %s",
             coll_status_name(s), coll_last_error());
    return -1;
  }
  out->offered += value_len;
  out->refused++;
  if (out->first_refusal[0] == '\0')
    snprintf(out->first_refusal, sizeof out->first_refusal, "%s",
             coll_last_error());
  return 0;
}

int store_push(const char *host, int port, const char *token, uint64_t bytes,
               size_t value_len, const char *prefix, int64_t timeout_ms,
               store_push_report_t *out) {
  int64_t start = coll__now_ms(), deadline = coll__deadline(timeout_ms);
  char *val = malloc(value_len > 0 ? value_len : 1), key[64];
  coll_store_t *st = NULL;
  int rc = 0;
  memset(out, 0, sizeof *out);
  if (val == NULL) {
    snprintf(out->failure, sizeof out->failure, "out of memory");
    return -1;
  }
  memset(val, 'x', value_len);
  while (out->offered < bytes) {
    coll_status_t s;
    if (coll__remaining_ms(deadline) == 0) {
      snprintf(out->failure, sizeof out->failure,
               "time ran out after %llu of %llu bytes",
               (unsigned long long)out->offered, (unsigned long long)bytes);
      rc = -1;
      break;
    }
    if (st == NULL) {
      int c = push_connect(host, port, token, deadline, value_len, out, &st);
      if (c < 0) {
        rc = -1;
        break;
      }
      if (c == 0) continue;
    }
    snprintf(key, sizeof key, "%s%llu", prefix,
             (unsigned long long)(out->keys + out->refused));
    s = coll__store_set(st, key, val, value_len);
    out->offered += value_len;
    if (s == COLL_OK) {
      out->stored += value_len;
      out->keys++;
      continue;
    }
    out->refused++;
    if (out->first_refusal[0] == '\0')
      snprintf(out->first_refusal, sizeof out->first_refusal, "%s",
               coll_last_error());
    /* The store closes a connection it refused: start another. */
    coll__store_close(st);
    st = NULL;
  }
  coll__store_close(st);
  free(val);
  out->elapsed_ms = coll__now_ms() - start;
  return rc;
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PUSH_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PUSH_SANITIZED 1
#endif

int store_push_sanitized(void) {
#ifdef PUSH_SANITIZED
  return 1;
#else
  return 0;
#endif
}

int store_push_rss_kib(int pid, int64_t *rss, int64_t *peak) {
  char path[64], line[256];
  FILE *f;
  int found = 0;
  if (pid > 0)
    snprintf(path, sizeof path, "/proc/%d/status", pid);
  else
    snprintf(path, sizeof path, "/proc/self/status");
  f = fopen(path, "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    long long v;
    if (sscanf(line, "VmRSS: %lld", &v) == 1) {
      *rss = v;
      found |= 1;
    } else if (sscanf(line, "VmHWM: %lld", &v) == 1) {
      *peak = v;
      found |= 2;
    }
  }
  fclose(f);
  return found == 3 ? 0 : -1;
}
