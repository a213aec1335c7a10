/* SPDX-License-Identifier: Apache-2.0 */
/* boot_test.h: helpers for the bootstrap tests: free ports, raw sockets that
 * speak (or mangle) the store protocol, child processes with a bounded
 * wait. */
#ifndef COLL_TEST_BOOT_TEST_H
#define COLL_TEST_BOOT_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bootstrap/store/store.h"
#include "bootstrap/store/store_ext.h"
#include "bootstrap/store/store_proto.h"
#include "core/error.h"

/* A store server on 127.0.0.1 (ephemeral port) for a test case: cmocka
 * setup/teardown; *state is a bt_store_t. */
typedef struct bt_store {
  coll_store_server_t *srv;
  int port;
} bt_store_t;
int bt_store_setup(void **state);
int bt_store_teardown(void **state);
/* A client of that server; NULL (with coll_last_error) on failure. */
coll_store_t *bt_client(const bt_store_t *f);

/* A TCP port on ip ("127.0.0.1", "::1") that was free a moment ago. */
int bt_free_port(const char *ip);
/* A port on ip that refuses every connection for as long as *fd_out stays
 * open (bound, never listening), and that no other socket can take
 * meanwhile, unlike a port found free and closed again; -1 on failure.
 * The caller closes *fd_out. */
int bt_dead_port(const char *ip, int *fd_out);

/* A blocking socket connected to ip:port whose reads and writes give up
 * after 5 s, so a test never hangs on it; -1 on failure. */
int bt_raw_connect(const char *ip, int port);
/* Completes the store HELLO without a token: 0 on success. */
int bt_raw_hello(int fd);
/* Sends exactly n bytes: 0 on success. */
int bt_send(int fd, const void *p, size_t n);
/* Reads a reply header (and its body into body/cap, truncated): the reply
 * code, or -1 when the connection closed or timed out. */
int bt_read_reply(int fd, coll_store_hdr_t *h, char *body, size_t cap);
/* 1 if the peer closed fd within timeout_ms (reads and drops data), 0 if
 * it is still open then. */
int bt_closed_within(int fd, int64_t timeout_ms);

/* Fails the test unless every rank in ranks[0..n) returned status `want`
 * with the same text (s[] and why[] indexed by rank), then prints it:
 * the all-or-nothing setup's promise. */
void bt_expect_same_failure(const coll_status_t *s,
                            const char (*why)[COLL_ERRMSG_MAX],
                            const int *ranks, int n, coll_status_t want);
/* Fails the test unless `part` is in `text`. */
void bt_must_contain(const char *text, const char *part);
/* Fails the test if `part` is in `text`. */
void bt_must_not_contain(const char *text, const char *part);

/* Forks a child that runs fn(arg) and _exits with its return value. */
pid_t bt_fork(int (*fn)(void *), void *arg);
/* Waits up to timeout_ms for pid; returns its exit status, or -1 after
 * killing it when it did not finish (a hang is a failure). */
int bt_wait_child(pid_t pid, int64_t timeout_ms);

/* n values of dt for seed r (a rank, or a rank's block): floats whose
 * magnitudes differ by seed, so the order of a sum shows in the bits;
 * near 1 for PROD; small integers, so an integer PROD neither overflows
 * nor is always 0. */
void bt_fill_values(void *buf, coll_dtype_t dt, coll_op_t op, int r, size_t n);
/* Into want (n elements of dt): block `block` of every rank's values
 * (seed r + 4 * block for rank r) combined in rank order with the scalar
 * kernel, in the dtype the CPU backend works in (8-bit SUM and AVG
 * widened), finished as the backend does (narrowed, scaled): what a rank
 * holds after an allreduce (block 0) or its reduce-scatter block. 0, or
 * -1 out of memory. */
int bt_reference(void *want, coll_dtype_t dt, coll_op_t op, int world,
                 int block, size_t n);
/* A forked rank's first failure, for the parent to read: sets *status
 * (s, or -1 for a wrong result when s is COLL_OK) and msg, unless a
 * failure was recorded before. */
void bt_fail_out(int *status, char *msg, size_t cap, coll_status_t s,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The environment coll_comm_init_env reads for a forked rank on
 * 127.0.0.1:port of a CPU comm: RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, COLL_BACKEND=cpu. */
void bt_launch_env(int rank, int world, int port);
/* One rank's TCP setup on 127.0.0.1:port under job id `job` (its token
 * "<job>-token"), the transport destroyed at once: the status, and the
 * last error's text in why. Any thread. */
coll_status_t bt_tcp_setup(int rank, int world, int port, const char *job,
                           int64_t timeout_ms, char *why, size_t cap);

#endif
