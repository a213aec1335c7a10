/* SPDX-License-Identifier: Apache-2.0 */
/* log.c: the log line writer ("host:pid:tid [rank] COLL LEVEL SUB message"). */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/env.h"

atomic_int coll__log_level_cache = -1;
static _Thread_local int tls_rank = -1;

int coll__log_level_init(void) {
  static const int levels[] = {[COLL_DEBUG_NONE] = COLL_LOG_NONE,
                               [COLL_DEBUG_WARN] = COLL_LOG_WARN,
                               [COLL_DEBUG_INFO] = COLL_LOG_INFO,
                               [COLL_DEBUG_TRACE] = COLL_LOG_TRACE};
  int l = levels[coll__knob(COLL_ENV_DEBUG)];
  atomic_store(&coll__log_level_cache, l);
  return l;
}

void coll__log_set_rank(int rank) { tls_rank = rank; }

static const char *sub_name(coll_log_sub_t s) {
  switch (s) {
    case COLL_LOG_INIT: return "INIT";
    case COLL_LOG_COLL: return "COLL";
    case COLL_LOG_NET: return "NET";
    case COLL_LOG_BOOT: return "BOOT";
    case COLL_LOG_NCCL: return "NCCL";
  }
  return "?";
}

void coll__log(coll_log_level_t level, coll_log_sub_t sub, const char *fmt,
               ...) {
  static const char *const lv[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "?";
  char msg[1024];
  va_list ap;
  gethostname(host, sizeof host - 1);
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One fprintf per line so lines of concurrent threads do not interleave. */
  if (tls_rank >= 0)
    fprintf(stderr, "%s:%d:%ld [%d] COLL %s %s %s\n", host, (int)getpid(),
            (long)syscall(SYS_gettid), tls_rank, lv[level], sub_name(sub), msg);
  else
    fprintf(stderr, "%s:%d:%ld COLL %s %s %s\n", host, (int)getpid(),
            (long)syscall(SYS_gettid), lv[level], sub_name(sub), msg);
}
