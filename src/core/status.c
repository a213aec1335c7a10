/* SPDX-License-Identifier: Apache-2.0 */
/* status.c: status names and texts, and the thread-local error buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

/* One buffer per thread (not per process, unlike ncclGetLastError): two
 * comms failing on two threads never overwrite each other's text. */
static _Thread_local char tls_errmsg[COLL_ERRMSG_MAX];

const char *coll_strerror(coll_status_t s) {
  switch (s) {
#define COLL_STATUS_TEXT_(name, value, text) \
  case COLL_##name: return text;
    COLL_STATUS_MAP(COLL_STATUS_TEXT_)
#undef COLL_STATUS_TEXT_
  }
  return "unknown status";
}

const char *coll_status_name(coll_status_t s) {
  switch (s) {
#define COLL_STATUS_NAME_(name, value, text) \
  case COLL_##name: return #name;
    COLL_STATUS_MAP(COLL_STATUS_NAME_)
#undef COLL_STATUS_NAME_
  }
  return "UNKNOWN";
}

const char *coll_last_error(void) { return tls_errmsg; }

static coll_status_t verr(coll_status_t s, const char *fmt, va_list ap) {
  vsnprintf(tls_errmsg, sizeof tls_errmsg, fmt, ap);
  return s;
}

coll_status_t coll__err(coll_status_t s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verr(s, fmt, ap);
  va_end(ap);
  return s;
}

coll_status_t coll_set_last_error(coll_status_t s, const char *fmt, ...) {
  va_list ap;
  if (fmt == NULL) {
    tls_errmsg[0] = '\0';
    return s;
  }
  va_start(ap, fmt);
  verr(s, fmt, ap);
  va_end(ap);
  return s;
}

void coll__err_prefix(const char *what) {
  char tmp[COLL_ERRMSG_MAX];
  size_t wl = strlen(what), ml;
  if (strncmp(tls_errmsg, what, wl) == 0 && tls_errmsg[wl] == ':') return;
  if (wl > COLL_ERRMSG_MAX / 2) wl = COLL_ERRMSG_MAX / 2;
  memcpy(tmp, what, wl);
  tmp[wl] = ':';
  tmp[wl + 1] = ' ';
  ml = strnlen(tls_errmsg, COLL_ERRMSG_MAX - 1);
  if (ml > COLL_ERRMSG_MAX - wl - 3) ml = COLL_ERRMSG_MAX - wl - 3;
  memcpy(tmp + wl + 2, tls_errmsg, ml);
  tmp[wl + 2 + ml] = '\0';
  memcpy(tls_errmsg, tmp, sizeof tmp);
}

void coll__err_clear(void) { tls_errmsg[0] = '\0'; }

void coll__err_save(char *dst) { memcpy(dst, tls_errmsg, COLL_ERRMSG_MAX); }

void coll__err_restore(const char *src) {
  memcpy(tls_errmsg, src, COLL_ERRMSG_MAX);
  tls_errmsg[COLL_ERRMSG_MAX - 1] = '\0';
}
