/* SPDX-License-Identifier: Apache-2.0 */
/* output.c: copying ranks' output line by line behind "[rank] ". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_run.h"

/* A longer line is cut into pieces of this size, each with its prefix. */
#define RUN_LINE_MAX 16384

void run_write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return; /* reader gone (SIGPIPE is ignored): drop it */
    buf += n;
    len -= (size_t)n;
  }
}

int run_stream_init(run_stream_t *s, int rank, int dst, int fd) {
  s->fd = fd;
  s->dst = dst;
  s->len = s->prefix_len = 0;
  /* coll-run reads only when poll says so, but a stray wakeup must not
   * block the whole job on one rank's pipe. */
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  s->line = malloc(RUN_LINE_MAX + 1); /* +1: room for a closing newline */
  if (s->line == NULL) return -1;
  s->prefix_len = s->len =
      (size_t)snprintf(s->line, RUN_LINE_MAX, "[%d] ", rank);
  return 0;
}

static void flush_line(run_stream_t *s) {
  if (s->line[s->len - 1] != '\n') s->line[s->len++] = '\n';
  run_write_all(s->dst, s->line, s->len);
  s->len = s->prefix_len;
}

/* Appends n bytes, writing out each line as it completes. */
static void feed(run_stream_t *s, const char *p, size_t n) {
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t take = nl != NULL ? (size_t)(nl - p) + 1 : n;
    size_t room = RUN_LINE_MAX - s->len;
    if (take > room) take = room;
    memcpy(s->line + s->len, p, take);
    s->len += take;
    p += take;
    n -= take;
    if (s->line[s->len - 1] == '\n' || s->len == RUN_LINE_MAX) flush_line(s);
  }
}

int run_stream_pump(run_stream_t *s) {
  char buf[65536];
  ssize_t n;
  if (s->fd < 0) return 1;
  n = read(s->fd, buf, sizeof buf);
  if (n > 0) {
    feed(s, buf, (size_t)n);
    return 0;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  run_stream_close(s); /* end of file, or an error that ends it too */
  return 1;
}

void run_stream_close(run_stream_t *s) {
  if (s->line != NULL && s->len > s->prefix_len) flush_line(s);
  free(s->line);
  s->line = NULL;
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}
