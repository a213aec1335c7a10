/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_test_util.h: helpers shared by the NCCL test executables. */
#ifndef COLL_TEST_NCCL_TEST_UTIL_H
#define COLL_TEST_NCCL_TEST_UTIL_H

#include "coll.h"
#include "standin.h"

/* Installs the stand-in with `ndev` devices and the given options. */
void nt_install(int ndev, int deferred, int version);

/* CMocka fixtures: the stand-in with 1 to 4 devices; with 2 devices whose
 * streams run only when looked at (deferred); with 2 devices and
 * the staging segment at NT_STAGE_SEG (plain or deferred streams); and the
 * teardown for all of them (streams released, stand-in and segment back to
 * their defaults). */
#define NT_STAGE_SEG ((size_t)64 << 10) /* small, so staged tests are fast */
int nt_setup1(void **state);
int nt_setup2(void **state);
int nt_setup3(void **state);
int nt_setup4(void **state);
int nt_setup_deferred2(void **state);
int nt_setup_staged(void **state);
int nt_setup_staged_deferred(void **state);
int nt_teardown(void **state);

/* `world` per-rank comms made by coll_comm_init_rank on rank threads, rank r
 * on device r % ndev. Returns 0 on success. */
int nt_rank_comms(int world, int64_t timeout_ms, coll_comm_t **comms);

/* The current device of this thread, as the table reports it. */
int nt_current_device(void);
void nt_set_device(int dev);

/* Checks the stand-in saw no misuse; prints what it saw otherwise. */
int nt_no_misuse(void);

#endif
