/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_test_util.h: helpers for the TCP transport tests: a rendezvous in a
 * temporary directory, forked rank processes with a bounded wait, results
 * shared with the parent, and a raw socket that speaks the handshake. */
#ifndef COLL_TESTS_TCP_UTIL_H
#define COLL_TESTS_TCP_UTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coll.h"
#include "transport/tcp/tcp_int.h"
#include "transport/tcp/tcp_sock.h"
#include "transport/transport.h"

#define TT_MAX_RANKS 16
#define TT_TEXT 320

/* What each rank process reports; lives in memory shared across fork. */
typedef struct tt_shared {
  atomic_int ready[TT_MAX_RANKS]; /* set by a rank at a point of its test */
  atomic_int go;                  /* set by the parent */
  int status[TT_MAX_RANKS];       /* a status the rank observed */
  char text[TT_MAX_RANKS][TT_TEXT];
  char addr[TT_MAX_RANKS][96]; /* scratch, e.g. for fake peers */
} tt_shared_t;

/* A job: its rendezvous directory, bind address and token. */
typedef struct tt_job {
  char dir[128];
  const char *ip;    /* "127.0.0.1" or "::1" */
  const char *token; /* NULL: none */
  char job_id[160];
  int64_t timeout_ms; /* mesh timeout */
  coll_tcp_xopts_t x;
  tt_shared_t *sh;
} tt_job_t;

/* Sets up a job with a fresh rendezvous directory and shared results.
 * Returns 0 on success. */
int tt_job_init(tt_job_t *job, const char *ip, const char *token);
void tt_job_fini(tt_job_t *job);

/* The rendezvous over job->dir: publish writes <dir>/rank.<r> through a
 * rename, lookup polls for it until the deadline. */
coll_tcp_rdv_t tt_rdv(tt_job_t *job);

/* Creates this rank's transport (in a rank process). */
coll_status_t tt_create(tt_job_t *job, int rank, int world,
                        coll_transport_t **out);

/* A rank's body: its return value becomes the process's exit code. */
typedef int (*tt_rank_fn)(tt_job_t *job, int rank, int world, void *arg);

/* Forks `world` rank processes (pids[rank]). */
void tt_spawn(tt_job_t *job, int world, tt_rank_fn fn, void *arg, pid_t *pids);
/* Forks one helper process running fn(job, -1, 0, arg). */
pid_t tt_spawn_helper(tt_job_t *job, tt_rank_fn fn, void *arg);
/* Waits for n processes until timeout_ms; codes[i] is the exit code (or
 * 128+signal). On timeout kills them all, writes which into msg and returns
 * -1; else returns the number of nonzero codes. */
int tt_wait(pid_t *pids, int n, int64_t timeout_ms, int *codes, char *msg,
            size_t cap);
/* Spawns and waits: 0 when every rank exited 0, else a message in msg. */
int tt_run(tt_job_t *job, int world, tt_rank_fn fn, void *arg,
           int64_t timeout_ms, char *msg, size_t cap);
/* Waits (bounded) until sh->ready[r] for each of the n ranks; 0 if so. */
int tt_wait_ready(tt_job_t *job, int n, int64_t timeout_ms);

/* Records a rank's observation for the parent. */
void tt_note(tt_job_t *job, int rank, coll_status_t s, const char *text);
/* Prints and notes a failed call for the parent; returns 1 (a rank's exit
 * status). */
int tt_failed(tt_job_t *job, int rank, const char *what, coll_status_t s);

/* In a rank function with `job` and `rank` in scope: return tt_failed(...)
 * when call does not return COLL_OK. */
#define TRY(call, what)                                         \
  do {                                                          \
    coll_status_t s_ = (call);                                  \
    if (s_ != COLL_OK) return tt_failed(job, rank, (what), s_); \
  } while (0)

/* Deterministic payload bytes for (src, dst, seq). */
void tt_fill(uint8_t *p, size_t n, int src, int dst, int seq);
/* 1 when p holds tt_fill's bytes. */
int tt_check(const uint8_t *p, size_t n, int src, int dst, int seq);

/* Raw client side of the wire, for fake peers. */
int tt_dial(const char *addr_text, int64_t timeout_ms); /* blocking fd */
int tt_send_all(int fd, const void *p, size_t n);
int tt_recv_all(int fd, void *p, size_t n, int64_t timeout_ms);
/* Completes a connector handshake as `rank` to `peer`; 0 on acceptance. */
int tt_handshake(int fd, int rank, int world, int peer, const char *job_id,
                 const char *token);
/* Looks up a rank's published address (polls until timeout_ms). */
int tt_lookup(tt_job_t *job, int rank, char *addr, size_t cap,
              int64_t timeout_ms);

int64_t tt_now_ms(void);
void tt_sleep_ms(int64_t ms);
/* 1 when this host can listen on ::1. */
int tt_have_ipv6(void);

/* Rank 0's endpoint of a 2-rank transport with no loop thread, whose
 * connection to rank 1 (`c`, nonblocking) is one end of a socketpair; the
 * test writes rank 1's bytes into `peer`, the other end. For the frame
 * parser's tests. */
typedef struct tt_rx_fixture {
  tcp_transport_t t;
  tcp_conn_t conns[2];
  tcp_conn_t *c;
  int peer; /* -1 once a test closed it */
} tt_rx_fixture_t;
/* A fixture accepting frames of up to frame_cap payload bytes; NULL when
 * the socketpair or memory fails. */
tt_rx_fixture_t *tt_rx_fixture_new(size_t frame_cap);
void tt_rx_fixture_free(tt_rx_fixture_t *f);

#endif
