/* SPDX-License-Identifier: Apache-2.0 */
/* trace_int.h: the flight recorder's objects, shared by trace.c (the ring),
 * trace_dump.c (the JSON file) and trace_signal.c (SIGUSR1 and the list of
 * live recorders). */
#ifndef COLL_CORE_TRACE_INT_H
#define COLL_CORE_TRACE_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "core/trace.h"

/* One collective. seq 0: an empty slot. */
typedef struct coll_trace_entry {
  uint64_t seq;
  const char *what; /* "allreduce", "allreduce_batch", ... (static text) */
  int dtype;        /* -1: none (barrier), -2: a batch of several dtypes */
  int redop;        /* -1: none */
  int root;         /* broadcast/reduce root, send/recv peer; -1: none */
  int p2p;          /* a send or receive */
  uint64_t count;   /* elements (per rank for allgather/reduce_scatter;
                       the sum over a batch) */
  uint64_t start_ns, end_ns; /* monotonic; end 0 while in flight */
  int done;
  coll_status_t status;
  int peer; /* a failure's peer, -1: not known */
} coll_trace_entry_t;

struct coll_trace {
  atomic_int refs;
  uv_mutex_t mu; /* guards ring and next_seq */
  coll_trace_entry_t *ring;
  uint32_t cap;
  uint64_t next_seq;
  int rank, world;
  int id; /* this process's comm number, from 1: %c */
  char backend[16];
  char name[64];
  char *pattern; /* COLL_TRACE_FILE when the comm was made */
  /* Wall clock minus monotonic clock at creation, ns: turns entry times
   * into Unix times that line up across ranks. */
  int64_t wall_offset_ns;
  atomic_uint dumps; /* names each dump's temporary file */
  /* The desync report of a timeout (core/desync.h), under mu; "": none. */
  char desync[COLL_TRACE_DESYNC_MAX];
  /* The list of live recorders (trace_signal.c's mutex). */
  struct coll_trace *reg_prev, *reg_next;
};

/* COLL_TRACE_FILE with %r (rank), %p (pid), %c (comm number) and %%
 * expanded into out; -1 if it does not fit. */
int coll__trace_path(const char *pattern, const coll_trace_t *t, char *out,
                     size_t cap);

#endif
