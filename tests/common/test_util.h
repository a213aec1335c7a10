/* SPDX-License-Identifier: Apache-2.0 */
/* test_util.h: running rank threads with a bounded wait, and small helpers
 * shared by the test executables. Rank threads never call cmocka asserts
 * (cmocka longjmps); they record results and the test thread asserts. */
#ifndef COLL_TEST_UTIL_H
#define COLL_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

typedef void (*test_rank_fn)(int rank, int world, void *arg);

/* Runs fn(rank, world, arg) on `world` threads and joins them. If they have
 * not all returned within timeout_ms, prints "HANG: <what> ..." and ends the
 * process with exit code 124: a hang is a failure with a message. */
void test_run_ranks(int world, test_rank_fn fn, void *arg, int64_t timeout_ms,
                    const char *what);

/* Creates `world` comms over the in-process transport (timeout_ms applies
 * to each comm; 0 = library default). Returns 0 on success. */
int test_inproc_comms(int world, int64_t timeout_ms, coll_comm_t **comms);
void test_destroy_comms(int world, coll_comm_t **comms);

/* Milliseconds on a monotonic clock. */
int64_t test_now_ms(void);
void test_sleep_ms(int64_t ms);

/* A deterministic pseudo-random generator (splitmix64). */
uint64_t test_rand(uint64_t *state);

#endif
