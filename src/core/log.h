/* SPDX-License-Identifier: Apache-2.0 */
/* log.h: leveled logging; the level is tested before anything is formatted. */
#ifndef COLL_CORE_LOG_H
#define COLL_CORE_LOG_H

#include <stdatomic.h>

typedef enum coll_log_level {
  COLL_LOG_NONE = 0,
  COLL_LOG_WARN = 1,
  COLL_LOG_INFO = 2,
  COLL_LOG_TRACE = 3
} coll_log_level_t;

/* Subsystems, printed in the line prefix. */
typedef enum coll_log_sub {
  COLL_LOG_INIT,
  COLL_LOG_COLL,
  COLL_LOG_NET,
  COLL_LOG_BOOT,
  COLL_LOG_NCCL
} coll_log_sub_t;

/* The cached level; -1 until the first use reads COLL_DEBUG. */
extern atomic_int coll__log_level_cache;
int coll__log_level_init(void);

static inline int coll__log_level(void) {
  int l = atomic_load_explicit(&coll__log_level_cache, memory_order_relaxed);
  return l >= 0 ? l : coll__log_level_init();
}

/* Sets the rank shown in this thread's log prefix (-1: none). */
void coll__log_set_rank(int rank);

void coll__log(coll_log_level_t level, coll_log_sub_t sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define COLL_LOG_AT_(lvl, sub, ...)                                       \
  do {                                                                    \
    if (coll__log_level() >= (lvl)) coll__log((lvl), (sub), __VA_ARGS__); \
  } while (0)
#define COLL_WARN(sub, ...) COLL_LOG_AT_(COLL_LOG_WARN, sub, __VA_ARGS__)
#define COLL_INFO(sub, ...) COLL_LOG_AT_(COLL_LOG_INFO, sub, __VA_ARGS__)
#define COLL_TRACE(sub, ...) COLL_LOG_AT_(COLL_LOG_TRACE, sub, __VA_ARGS__)

#endif
