/* SPDX-License-Identifier: Apache-2.0 */
/* trace_dump.c: writing a flight recorder as JSON. The ring is copied
 * under the recorder's mutex; the file is written without it, to a
 * temporary name first and then renamed, so a reader never sees half a
 * file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/trace_int.h"

int coll__trace_path(const char *pattern, const coll_trace_t *t, char *out,
                     size_t cap) {
  size_t n = 0, k;
  const char *p;
  for (p = pattern; *p != '\0'; p++) {
    char add[24] = {*p, '\0'};
    if (p[0] == '%' && p[1] == 'r')
      snprintf(add, sizeof add, "%d", t->rank);
    else if (p[0] == '%' && p[1] == 'p')
      snprintf(add, sizeof add, "%ld", (long)getpid());
    else if (p[0] == '%' && p[1] == 'c')
      snprintf(add, sizeof add, "%d", t->id);
    /* "%%" is one '%'; any other '%' stays as it is. */
    if (p[0] == '%' &&
        (p[1] == 'r' || p[1] == 'p' || p[1] == 'c' || p[1] == '%'))
      p++;
    k = strlen(add);
    if (k >= cap - n) return -1;
    memcpy(out + n, add, k);
    n += k;
  }
  out[n] = '\0';
  return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static long long wall_us(const coll_trace_t *t, uint64_t mono_ns) {
  return (long long)(((int64_t)mono_ns + t->wall_offset_ns) / 1000);
}

static void put_entry(FILE *f, const coll_trace_t *t,
                      const coll_trace_entry_t *e, uint64_t now) {
  fprintf(f, "    {\"seq\": %llu, \"op\": ", (unsigned long long)e->seq);
  put_string(f, e->what);
  fputs(", \"dtype\": ", f);
  if (e->dtype == -1)
    fputs("null", f);
  else
    put_string(
        f, e->dtype == -2 ? "mixed" : coll_dtype_name((coll_dtype_t)e->dtype));
  fprintf(f, ", \"count\": %llu, \"redop\": ", (unsigned long long)e->count);
  if (e->redop < 0)
    fputs("null", f);
  else
    put_string(f, coll_op_name((coll_op_t)e->redop));
  fputs(", \"root\": ", f);
  if (e->root < 0)
    fputs("null", f);
  else
    fprintf(f, "%d", e->root);
  fprintf(f, ", \"start_us\": %lld, \"end_us\": ", wall_us(t, e->start_ns));
  if (e->done)
    fprintf(f, "%lld", wall_us(t, e->end_ns));
  else
    fputs("null", f);
  fprintf(
      f, ", \"duration_us\": %llu, \"state\": \"%s\", \"status\": ",
      (unsigned long long)(((e->done ? e->end_ns : now) - e->start_ns) / 1000),
      e->done ? "done" : "in_flight");
  if (e->done)
    put_string(f, coll_status_name(e->status));
  else
    fputs("null", f);
  fputs(", \"peer\": ", f);
  if (e->done && e->peer >= 0)
    fprintf(f, "%d", e->peer);
  else
    fputs("null", f);
  fputc('}', f);
}

/* The whole document; entries oldest first. */
static void put_doc(FILE *f, const coll_trace_t *t, const char *reason,
                    const char *desync, const coll_trace_entry_t *ring,
                    uint64_t next_seq) {
  uint64_t now = coll__now_ns(), first, seq;
  int any = 0;
  first = next_seq > t->cap ? next_seq - t->cap : 1;
  fputs("{\n  \"format\": \"libcoll flight recorder 1\",\n  \"reason\": ", f);
  put_string(f, reason);
  fprintf(f, ",\n  \"rank\": %d,\n  \"size\": %d,\n  \"backend\": ", t->rank,
          t->world);
  put_string(f, t->backend);
  fputs(",\n  \"comm\": ", f);
  put_string(f, t->name);
  if (desync[0] != '\0') {
    fputs(",\n  \"desync\": ", f);
    put_string(f, desync);
  }
  fprintf(f,
          ",\n  \"comm_number\": %d,\n  \"pid\": %ld,\n  \"time_us\": %lld,\n"
          "  \"entries_max\": %u,\n  \"entries_recorded\": %llu,\n"
          "  \"entries\": [\n",
          t->id, (long)getpid(), wall_us(t, now), t->cap,
          (unsigned long long)(next_seq - 1));
  for (seq = first; seq < next_seq; seq++) {
    const coll_trace_entry_t *e = &ring[(seq - 1) % t->cap];
    if (e->seq != seq) continue;
    if (any) fputs(",\n", f);
    put_entry(f, t, e, now);
    any = 1;
  }
  fputs(any ? "\n  ]\n}\n" : "  ]\n}\n", f);
}

int coll__trace_dump(coll_trace_t *t, const char *reason) {
  const char *pattern = t != NULL ? t->pattern : NULL;
  char path[4096], tmp[4160], desync[COLL_TRACE_DESYNC_MAX];
  coll_trace_entry_t *copy;
  uint64_t next_seq;
  FILE *f;
  int err;
  if (t == NULL || pattern == NULL) return -1;
  if (coll__trace_path(pattern, t, path, sizeof path) != 0) {
    /* The pattern last and cut short: the log line has room for the why. */
    COLL_WARN(COLL_LOG_COLL,
              "flight recorder: COLL_TRACE_FILE expands to a path too long "
              "(over %zu bytes); nothing written (COLL_TRACE_FILE=%.80s...)",
              sizeof path - 1, pattern);
    return -1;
  }
  copy = malloc((size_t)t->cap * sizeof *copy);
  if (copy == NULL) {
    COLL_WARN(COLL_LOG_COLL, "flight recorder: no memory to write %s", path);
    return -1;
  }
  uv_mutex_lock(&t->mu);
  memcpy(copy, t->ring, (size_t)t->cap * sizeof *copy);
  next_seq = t->next_seq;
  memcpy(desync, t->desync, sizeof desync);
  uv_mutex_unlock(&t->mu);
  snprintf(tmp, sizeof tmp, "%s.tmp%ld.%u", path, (long)getpid(),
           atomic_fetch_add(&t->dumps, 1));
  f = fopen(tmp, "w");
  if (f == NULL) {
    err = errno;
    COLL_WARN(COLL_LOG_COLL, "flight recorder: cannot write %s: %s", tmp,
              strerror(err));
    free(copy);
    return -1;
  }
  put_doc(f, t, reason, desync, copy, next_seq);
  free(copy);
  err = ferror(f) ? EIO : 0;
  if (fclose(f) != 0 && err == 0) err = errno;
  if (err == 0 && rename(tmp, path) != 0) err = errno;
  if (err != 0) {
    COLL_WARN(COLL_LOG_COLL, "flight recorder: cannot write %s: %s", path,
              strerror(err));
    unlink(tmp);
    return -1;
  }
  COLL_INFO(COLL_LOG_COLL, "flight recorder: %s: wrote %s", reason, path);
  return 0;
}
