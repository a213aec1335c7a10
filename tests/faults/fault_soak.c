/* SPDX-License-Identifier: Apache-2.0 */
/* fault_soak.c: random fault jobs for the soak (fault_soak.h). */
#include "fault_soak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static int pick(uint64_t *rng, int n) {
  return (int)(test_rand(rng) % (uint64_t)n);
}

fj_spec_t fs_random_spec(uint64_t *rng) {
  static const size_t counts[] = {256, 4096, 65536, 262144};
  static const fj_fault_t faults[5] = {FJ_KILL, FJ_STOP, FJ_ABORT, FJ_GARBAGE,
                                       FJ_PARTITION};
  fj_spec_t s = fj_spec_default((fj_path_t)pick(rng, 3));
  /* Shared memory alone carries an allreduce in rounds through slots, not
   * in messages: no bytes there that a check could refuse (a rank that
   * scribbles over its slot is as undetectable as a TCP payload flipped on
   * its way, docs/wire-and-security.md), and no link to cut. */
  int nfaults = s.path == FJ_SHM ? 3 : 5;
  s.proxy = s.path != FJ_SHM;
  s.hb_ms = FS_HB_MS;
  s.count = counts[pick(rng, 4)];
  s.before = 1 + pick(rng, 3);
  /* Nobody late: the fault lands somewhere in a stream of allreduces. A
   * garbage header or a cut link may wait for a heartbeat (a quarter of T)
   * to be noticed: the stream then lasts long enough. */
  s.after = FJ_STREAM;
  s.settle_ms = pick(rng, 60);
  s.fault = faults[pick(rng, nfaults)];
  s.victim = pick(rng, s.world);
  /* Garbage in a frame header from one end of the proxied link, or on the
   * two-level path in the shared-memory messages between a host's ranks. */
  s.garbage_shm = s.fault == FJ_GARBAGE && s.path == FJ_ROUTE && pick(rng, 2);
  if (s.fault == FJ_GARBAGE && !s.garbage_shm)
    s.victim = pick(rng, 2) ? s.proxy_hi : s.proxy_lo;
  if (s.fault == FJ_GARBAGE || s.fault == FJ_PARTITION)
    s.tail_ms = 3 * FS_HB_MS;
  if (s.fault == FJ_STOP) {
    static const int64_t stops[] = {FS_HB_MS / 2, FS_HB_MS * 3 / 2, -1};
    s.stop_ms = stops[pick(rng, 3)];
  }
  if (pick(rng, 3) == 0) {
    s.late = pick(rng, s.world);
    /* A stop (or a cut) fails only the calls that wait on the victim
     * (the link), and garbage is seen only where the link is read, which
     * the ranks that wait on the late one may not do: the late rank then
     * comes back on its own, once a stop is over. */
    if (s.fault == FJ_STOP || s.fault == FJ_PARTITION || s.fault == FJ_GARBAGE)
      s.late_ms = s.settle_ms + (s.stop_ms > 0 ? s.stop_ms : 0) + 300;
  }
  s.bound_ms = 20000;
  return s;
}

void fs_describe(const fj_spec_t *s, char *buf, size_t n) {
  int k =
      snprintf(buf, n, "%s %s", fj_path_name(s->path), fj_fault_name(s->fault));
  if (k < 0 || (size_t)k >= n) return;
  if (s->fault == FJ_PARTITION)
    k += snprintf(buf + k, n - (size_t)k, " of ranks %d-%d", s->proxy_lo,
                  s->proxy_hi);
  else
    k += snprintf(buf + k, n - (size_t)k, " of rank %d", s->victim);
  if (s->fault == FJ_STOP && (size_t)k < n)
    k += s->stop_ms < 0 ? snprintf(buf + k, n - (size_t)k, " for good")
                        : snprintf(buf + k, n - (size_t)k, " for %lld ms",
                                   (long long)s->stop_ms);
  if (s->late >= 0 && (size_t)k < n)
    k += snprintf(buf + k, n - (size_t)k, ", rank %d late", s->late);
  if ((size_t)k < n)
    snprintf(buf + k, n - (size_t)k, ", %zu floats, after allreduce %d",
             s->count, s->before);
}

void fs_times_add(fs_times_t *t, int64_t ms) {
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 64;
    int64_t *v = realloc(t->v, (size_t)cap * sizeof *v);
    if (v == NULL) return;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n++] = ms;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int64_t fs_times_pct(fs_times_t *t, double p) {
  int i;
  if (t->n == 0) return -1;
  qsort(t->v, (size_t)t->n, sizeof *t->v, cmp64);
  i = (int)(p / 100.0 * (t->n - 1) + 0.5);
  return t->v[i < 0 ? 0 : i >= t->n ? t->n - 1 : i];
}

void fs_times_free(fs_times_t *t) {
  free(t->v);
  memset(t, 0, sizeof *t);
}
