/* SPDX-License-Identifier: Apache-2.0 */
/* desync.c: the sentence of a desync report. */
#include "core/desync.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/work.h"

/* What a rank was doing, as far as the report groups ranks. */
enum { AT_OTHER = 0, AT_SAME, AT_SILENT, AT_SELF };

/* Ranks past this many are left out (the sentence is cut long before). */
#define DESYNC_RANKS_MAX 1024

typedef struct out {
  char *buf;
  size_t n, len;
  int parts;
} out_t;

static void put(out_t *o, const char *fmt, ...) {
  va_list ap;
  int k;
  if (o->len + 1 >= o->n) return;
  va_start(ap, fmt);
  k = vsnprintf(o->buf + o->len, o->n - o->len, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  o->len += (size_t)k;
  if (o->len >= o->n) o->len = o->n - 1; /* cut: the rest is lost */
}

static const char *kind_name(int kind) {
  if (kind < COLL_WORK_ALLREDUCE || kind > COLL_WORK_KIND_LAST) return "call";
  return coll__work_name((coll_work_kind_t)kind);
}

/* "broadcast #40" */
static void put_call(out_t *o, const coll_pos_snap_t *p) {
  put(o, "%s #%llu", kind_name(p->kind), (unsigned long long)p->seq);
}

static void put_p2p(out_t *o, const coll_pos_snap_t *p) {
  if (p->p2p == COLL_POS_P2P_RECV && p->p2p_peer < 0) {
    put(o, "recv from any rank (tag %u)", p->p2p_tag);
    return;
  }
  put(o, "%s %s rank %d (tag %u)",
      p->p2p == COLL_POS_P2P_SEND ? "send" : "recv",
      p->p2p == COLL_POS_P2P_SEND ? "to" : "from", p->p2p_peer, p->p2p_tag);
}

static void put_last(out_t *o, const coll_pos_snap_t *p) {
  if (p->seq == 0) {
    put(o, " (no collective yet)");
    return;
  }
  put(o, " (last finished ");
  put_call(o, p);
  put(o, ")");
}

/* One rank that is neither in the call nor silent. */
static void put_other(out_t *o, int r, const coll_pos_snap_t *me,
                      const coll_pos_snap_t *p) {
  put(o, "rank %d ", r);
  if (p->in_call) {
    put(o, p->seq < me->seq ? "is still in " : "is in ");
    put_call(o, p);
  } else if (p->p2p != COLL_POS_P2P_NONE) {
    put(o, "is in ");
    put_p2p(o, p);
  } else if (!me->in_call) {
    put(o, "is in user code");
    put_last(o, p);
  } else if (p->seq < me->seq) {
    put(o, "never entered it");
    put_last(o, p);
  } else {
    put(o, "has left it");
    put_last(o, p);
  }
}

/* Before each part after the call's own: ": " first, then "; ". */
static void put_sep(out_t *o) { put(o, o->parts++ == 0 ? ": " : "; "); }

/* "ranks 0,2 are in it" / "rank 3 did not answer" */
static void put_group(out_t *o, const int *at, int world, int which,
                      const char *one, const char *many) {
  int r, k = 0, count = 0;
  for (r = 0; r < world; r++) count += at[r] == which;
  if (count == 0) return;
  put_sep(o);
  put(o, "%s ", count == 1 ? "rank" : "ranks");
  for (r = 0; r < world; r++) {
    if (at[r] != which) continue;
    put(o, "%s%d", k++ ? "," : "", r);
  }
  put(o, " %s", count == 1 ? one : many);
}

static int classify(const coll_pos_snap_t *me, const coll_pos_snap_t *p,
                    int answered) {
  if (!answered) return AT_SILENT;
  if (me->in_call && p->in_call && p->seq == me->seq && p->kind == me->kind)
    return AT_SAME;
  return AT_OTHER;
}

void coll__desync_report(int self, int world, const coll_pos_snap_t *pos,
                         const unsigned char *answered, int64_t timeout_ms,
                         char *buf, size_t n) {
  const coll_pos_snap_t *me = &pos[self];
  out_t o = {buf, n, 0, 0};
  int at[DESYNC_RANKS_MAX], r;
  int scan = world < DESYNC_RANKS_MAX ? world : DESYNC_RANKS_MAX;
  if (n == 0) return;
  buf[0] = '\0';
  if (me->in_call)
    put_call(&o, me);
  else if (me->p2p != COLL_POS_P2P_NONE)
    put_p2p(&o, me);
  else
    put(&o, "a call");
  if (timeout_ms >= 0)
    put(&o, " timed out after %.1f s", (double)timeout_ms / 1000.0);
  else
    put(&o, " timed out");
  for (r = 0; r < scan; r++) {
    if (r == self)
      at[r] = me->in_call ? AT_SAME : AT_SELF;
    else
      at[r] = classify(me, &pos[r], answered[r]);
    if (at[r] != AT_OTHER) continue;
    put_sep(&o);
    put_other(&o, r, me, &pos[r]);
  }
  put_group(&o, at, scan, AT_SILENT, "did not answer", "did not answer");
  put_group(&o, at, scan, AT_SAME, "is in it", "are in it");
}
