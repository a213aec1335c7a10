/* SPDX-License-Identifier: Apache-2.0 */
/* error.h: thread-local error text and check-and-goto propagation. */
#ifndef COLL_CORE_ERROR_H
#define COLL_CORE_ERROR_H

#include "coll.h"

#define COLL_ERRMSG_MAX 512

/* Records "fmt" as this thread's coll_last_error() text and returns s.
 * Any thread. */
coll_status_t coll__err(coll_status_t s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes this thread's current error text with "what: " (once). */
void coll__err_prefix(const char *what);
/* Clears this thread's error text (the start of every public call). */
void coll__err_clear(void);
/* Copies this thread's text into dst (COLL_ERRMSG_MAX bytes) / sets it. */
void coll__err_save(char *dst);
void coll__err_restore(const char *src);

/* Evaluate `call`; on failure store its status in `s` and jump to `label`.
 * Every function that uses it has one cleanup label. */
#define COLL_CHECK_GOTO(call, s, label) \
  do {                                  \
    (s) = (call);                       \
    if ((s) != COLL_OK) goto label;     \
  } while (0)

#define COLL_CHECK(call)                    \
  do {                                      \
    coll_status_t coll_s_ = (call);         \
    if (coll_s_ != COLL_OK) return coll_s_; \
  } while (0)

#endif
