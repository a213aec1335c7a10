/* SPDX-License-Identifier: Apache-2.0 */
/* review.h: what the steps of review_gpu share: result lines, clocks,
 * host-side element values, device buffers, a host function that holds a
 * stream, and a thread that calls coll_abort at a given time. */
#ifndef COLL_REVIEW_H
#define COLL_REVIEW_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Exit code of a step that cannot run here; tests/gpu/run.sh reports it as
 * skipped, and coll-run passes it on from the rank that exited first. */
#define RV_EXIT_SKIP 77

#if defined(__GNUC__)
#define RV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RV_PRINTF(a, b)
#endif

/* ---- result lines ------------------------------------------------------ */
/* "PASS name: detail" when ok, else "FAIL name: detail"; flushed at once so a
 * step killed by its timeout keeps what it printed. Returns ok. */
int rv_check(int ok, const char *name, const char *fmt, ...) RV_PRINTF(3, 4);
/* "SKIP name: detail". */
void rv_skip(const char *name, const char *fmt, ...) RV_PRINTF(2, 3);
/* FAIL lines printed so far by this process. */
int rv_failures(void);

/* A check made of many cases, reported as one line: the first three
 * failures are the detail of a FAIL line (every one goes to stderr), else
 * the PASS detail is printed. */
typedef struct rv_acc {
  const char *name;
  int cases, bad;
  char why[768];
} rv_acc_t;
void rv_acc_init(rv_acc_t *a, const char *name);
/* Counts one case; a failed one adds fmt to the detail. Returns ok. */
int rv_acc_case(rv_acc_t *a, int ok, const char *fmt, ...) RV_PRINTF(3, 4);
/* Prints the line; `fmt` is the PASS detail. Returns 1 if all passed. */
int rv_acc_end(rv_acc_t *a, const char *fmt, ...) RV_PRINTF(2, 3);

/* ---- clocks and statuses ------------------------------------------------ */
double rv_now_ms(void); /* monotonic clock, ms with fractions */
void rv_sleep_ms(double ms);
/* "ERR_TIMEOUT (the calling thread's coll_last_error())", in one of four
 * buffers of the calling thread used in turn (one printf may show four). */
const char *rv_status(coll_status_t s);
/* RANK from the environment (coll-run sets it), 0 without one. */
int rv_env_rank(void);

/* ---- element values on the host ----------------------------------------- */
uint64_t rv_rand(uint64_t *state);
/* n random elements: all bits of integers; finite, normal floating-point
 * values whose quarter is normal too (so x * 0.25 is exact). */
void rv_fill_random(coll_dtype_t dt, void *host, size_t n, uint64_t seed);
/* Element i of p as a double, and v stored into element i (rounded to the
 * nearest value of dt; the checks only store values dt holds exactly). */
double rv_get(coll_dtype_t dt, const void *p, size_t i);
void rv_put(coll_dtype_t dt, void *p, size_t i, double v);
float rv_f16_to_float(uint16_t h);
uint16_t rv_float_to_f16(float f);
float rv_bf16_to_float(uint16_t h);
uint16_t rv_float_to_bf16(float f);
/* Index of the first element where a and b differ bitwise, n if none. */
size_t rv_first_diff(const void *a, const void *b, size_t n, size_t es);

/* ---- device ---------------------------------------------------------------
 * Every failing CUDA call below prints a FAIL line naming `name`. */
/* 1 if a CUDA device exists (device 0 made current), else a FAIL line that
 * says why and 0. */
int rv_device_ready(const char *name);
int rv_cuda(const char *name, const char *what, cudaError_t e);
void *rv_dev_alloc(const char *name, size_t bytes);
/* A stream that does not synchronise with the legacy default stream. */
cudaStream_t rv_stream_new(const char *name);
/* Queues a host function on s that sleeps ms: work queued on s behind it
 * cannot start before it returns (no nvcc needed for "slow stream work"). */
int rv_stream_sleep(const char *name, cudaStream_t s, int ms);
/* Copies device bytes to host on stream s and waits for s alone. */
int rv_download(const char *name, void *host, const void *dev, size_t bytes,
                cudaStream_t s);
/* Copies host bytes to the device; they are there for any stream after. */
int rv_upload(const char *name, void *dev, const void *host, size_t bytes);

/* A world-1 NCCL comm on the current device (cfg may be NULL). */
coll_status_t rv_comm_world1(const coll_comm_config_t *cfg, coll_comm_t **out);

/* ---- a thread that aborts ------------------------------------------------ */
typedef struct rv_aborter {
  coll_abort_handle_t *h;
  double start_ms, delay_ms;
  double abort_ms, return_ms; /* when coll_abort was called and returned */
  coll_status_t status;
  atomic_int done;
  pthread_t th;
} rv_aborter_t;
/* Starts a thread that calls coll_abort(h) delay_ms from now. Returns 0. */
int rv_aborter_start(rv_aborter_t *a, coll_abort_handle_t *h, double delay_ms);
/* Joins it if it finished within limit_ms; 0 if it is still inside
 * coll_abort (then it is left running, and the process should end). */
int rv_aborter_join(rv_aborter_t *a, double limit_ms);

/* ---- a rank of a coll-run job (review_ranks.c) -----------------------------
 */
typedef struct rk {
  const char *name;
  char label[64]; /* "name (rank r)" */
  coll_comm_t *c;
  int rank, world;
  cudaStream_t s;
  void *dsend, *drecv;
  unsigned char *host, *back;
  size_t cap; /* bytes of each buffer */
} rk_t;
/* Makes the comm from coll-run's environment (coll_comm_init_env) and the
 * buffers. Returns 1, or 0 after a FAIL line, or RV_EXIT_SKIP when
 * `skip_init` and the init failed (a SKIP line from rank 0). */
int rk_open(rk_t *k, const char *name, const char *backend, int64_t timeout_ms,
            size_t cap, int skip_init);
void rk_close(rk_t *k);
/* Rank r's element i: small even integers, exact in every dtype. */
double rk_val(int r, size_t i);
/* dev[0..n) := rk_val(r, first + i) in dt. */
int rk_put(rk_t *k, void *dev, coll_dtype_t dt, size_t n, int r, size_t first);
/* 0xA5 into drecv, ordered before what follows on the comm's stream. */
int rk_poison(rk_t *k);

/* ---- the steps ------------------------------------------------------------
 * Each prints its lines and returns the process's exit code. */
int rv_probe(void);
int rv_world1(void);
int rv_stream_order(void);
int rv_buffers(void);
int rv_watchdog(void);
int rv_abort_thread(void);
int rv_abort_race(void);
int rv_init_timeout(void);
int rv_init_abort(void);
int rv_cpu_rank(void);
int rv_rank2_colls(void);
int rv_rank2_exchange(void);
int rv_rank2_abort(void);
int rv_rank2_order(void);
int rv_rank2_abort_held(void);
int rv_rank2_queued_timeout(void);
int rv_rank2_shrink(void);
int rv_rank2_latency(void);
int rv_init_blocking(void);
int rv_m6_probe(void);

#endif
