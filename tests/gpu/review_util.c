/* SPDX-License-Identifier: Apache-2.0 */
/* review_util.c: the helpers of review.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "review.h"

static atomic_int failures;

static void line(const char *word, const char *name, const char *fmt,
                 va_list ap) {
  char detail[1024];
  vsnprintf(detail, sizeof detail, fmt, ap);
  printf("%s %s: %s\n", word, name, detail);
  fflush(stdout);
}

int rv_check(int ok, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  line(ok ? "PASS" : "FAIL", name, fmt, ap);
  va_end(ap);
  if (!ok) atomic_fetch_add(&failures, 1);
  return ok;
}

void rv_skip(const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  line("SKIP", name, fmt, ap);
  va_end(ap);
}

int rv_failures(void) { return atomic_load(&failures); }

void rv_acc_init(rv_acc_t *a, const char *name) {
  memset(a, 0, sizeof *a);
  a->name = name;
}

int rv_acc_case(rv_acc_t *a, int ok, const char *fmt, ...) {
  size_t used = strlen(a->why);
  va_list ap;
  a->cases++;
  if (ok) return 1;
  /* Every failed case goes to stderr (the step's log); the line keeps 3. */
  fprintf(stderr, "failed case of %s: ", a->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (++a->bad <= 3 && used + 8 < sizeof a->why) {
    if (used > 0)
      used += (size_t)snprintf(a->why + used, sizeof a->why - used, "; ");
    va_start(ap, fmt);
    vsnprintf(a->why + used, sizeof a->why - used, fmt, ap);
    va_end(ap);
  }
  return 0;
}

int rv_acc_end(rv_acc_t *a, const char *fmt, ...) {
  va_list ap;
  if (a->bad > 0)
    return rv_check(0, a->name, "%d of %d cases failed: %s%s", a->bad, a->cases,
                    a->why, a->bad > 3 ? "; all of them on stderr" : "");
  va_start(ap, fmt);
  line("PASS", a->name, fmt, ap);
  va_end(ap);
  return 1;
}

double rv_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void rv_sleep_ms(double ms) {
  struct timespec ts;
  if (ms <= 0) return;
  ts.tv_sec = (time_t)(ms / 1e3);
  ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1e3) * 1e6);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

const char *rv_status(coll_status_t s) {
  /* A few buffers in turn, so one printf can show several statuses. */
  static _Thread_local char bufs[4][768];
  static _Thread_local unsigned next;
  char *buf = bufs[next++ % 4];
  const char *why = coll_last_error();
  if (s == COLL_OK)
    snprintf(buf, sizeof bufs[0], "OK");
  else
    snprintf(buf, sizeof bufs[0], "%s (%s)", coll_status_name(s),
             why[0] != '\0' ? why : coll_strerror(s));
  return buf;
}

int rv_env_rank(void) {
  const char *r = getenv("RANK");
  return r != NULL ? atoi(r) : 0;
}

/* ---- element values ------------------------------------------------------ */

uint64_t rv_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float rv_f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu, bits;
  float f;
  if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
    f = (float)mant / 16777216.0f;
    return sign ? -f : f;
  }
  if (exp == 31)
    bits = sign | 0x7f800000u | (mant << 13);
  else
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t rv_float_to_f16(float f) {
  uint32_t x, ax, sign, h, rest;
  memcpy(&x, &f, sizeof x);
  sign = (x >> 16) & 0x8000u;
  ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* to inf */
  if (ax < 0x38800000u) { /* below 2^-14: subnormal, mant = |f| * 2^24 */
    float a, t, frac;
    memcpy(&a, &ax, sizeof a);
    t = a * 16777216.0f; /* exact: a power-of-two scaling */
    h = (uint32_t)t;
    frac = t - (float)h;
    if (frac > 0.5f || (frac == 0.5f && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
  rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

float rv_bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t rv_float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest, ties to even */
  return (uint16_t)(x >> 16);
}

void rv_fill_random(coll_dtype_t dt, void *host, size_t n, uint64_t seed) {
  uint64_t st = seed, r, sign, exp;
  size_t i;
  for (i = 0; i < n; i++) {
    r = rv_rand(&st);
    sign = r >> 63;
    switch (dt) {
      case COLL_F16: { /* exponent field 3..30 */
        uint16_t v = (uint16_t)((sign << 15) | ((3 + r % 28) << 10) |
                                ((r >> 8) & 0x3ffu));
        memcpy((char *)host + 2 * i, &v, 2);
        break;
      }
      case COLL_BF16: { /* exponent field 64..190 */
        uint16_t v = (uint16_t)((sign << 15) | ((64 + r % 127) << 7) |
                                ((r >> 8) & 0x7fu));
        memcpy((char *)host + 2 * i, &v, 2);
        break;
      }
      case COLL_F32: {
        uint32_t v = (uint32_t)((sign << 31) | ((64 + r % 127) << 23) |
                                ((r >> 8) & 0x7fffffu));
        memcpy((char *)host + 4 * i, &v, 4);
        break;
      }
      case COLL_F64: { /* exponent field 896..1151 */
        uint64_t v;
        exp = 896 + r % 256;
        v = (sign << 63) | (exp << 52) | (rv_rand(&st) & 0xfffffffffffffull);
        memcpy((char *)host + 8 * i, &v, 8);
        break;
      }
      default:
        memcpy((char *)host + coll_dtype_size(dt) * i, &r, coll_dtype_size(dt));
        break;
    }
  }
}

double rv_get(coll_dtype_t dt, const void *p, size_t i) {
  const char *b = (const char *)p + coll_dtype_size(dt) * i;
  uint16_t h;
  switch (dt) {
    case COLL_F16: memcpy(&h, b, 2); return rv_f16_to_float(h);
    case COLL_BF16: memcpy(&h, b, 2); return rv_bf16_to_float(h);
    case COLL_F32: {
      float v;
      memcpy(&v, b, 4);
      return v;
    }
    case COLL_F64: {
      double v;
      memcpy(&v, b, 8);
      return v;
    }
    case COLL_I8: return (double)*(const int8_t *)b;
    case COLL_U8: return (double)*(const uint8_t *)b;
    case COLL_I32: {
      int32_t v;
      memcpy(&v, b, 4);
      return v;
    }
    case COLL_I64: {
      int64_t v;
      memcpy(&v, b, 8);
      return (double)v;
    }
    default: return 0;
  }
}

void rv_put(coll_dtype_t dt, void *p, size_t i, double v) {
  char *b = (char *)p + coll_dtype_size(dt) * i;
  switch (dt) {
    case COLL_F16: {
      uint16_t h = rv_float_to_f16((float)v);
      memcpy(b, &h, 2);
      break;
    }
    case COLL_BF16: {
      uint16_t h = rv_float_to_bf16((float)v);
      memcpy(b, &h, 2);
      break;
    }
    case COLL_F32: {
      float f = (float)v;
      memcpy(b, &f, 4);
      break;
    }
    case COLL_F64: memcpy(b, &v, 8); break;
    case COLL_I8: *(int8_t *)b = (int8_t)v; break;
    case COLL_U8: *(uint8_t *)b = (uint8_t)v; break;
    case COLL_I32: {
      int32_t x = (int32_t)v;
      memcpy(b, &x, 4);
      break;
    }
    case COLL_I64: {
      int64_t x = (int64_t)v;
      memcpy(b, &x, 8);
      break;
    }
    default: break;
  }
}

size_t rv_first_diff(const void *a, const void *b, size_t n, size_t es) {
  size_t i;
  if (memcmp(a, b, n * es) == 0) return n;
  for (i = 0; i < n; i++)
    if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0)
      return i;
  return n;
}

/* ---- device ----------------------------------------------------------------
 */

int rv_device_ready(const char *name) {
  int n = 0, drv = 0, rt = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char driver[64] = "no NVIDIA driver is loaded";
    if (drv > 0)
      snprintf(driver, sizeof driver, "driver for CUDA %d.%d", drv / 1000,
               drv % 1000 / 10);
    rv_check(0, name,
             "no usable CUDA device: cudaGetDeviceCount says %s (CUDA error "
             "%d); %s, CUDA runtime %d.%d",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", (int)e,
             driver, rt / 1000, rt % 1000 / 10);
    return 0;
  }
  return rv_cuda(name, "cudaSetDevice(0)", cudaSetDevice(0));
}

int rv_cuda(const char *name, const char *what, cudaError_t e) {
  if (e == cudaSuccess) return 1;
  rv_check(0, name, "%s: %s (CUDA error %d)", what, cudaGetErrorString(e),
           (int)e);
  return 0;
}

void *rv_dev_alloc(const char *name, size_t bytes) {
  void *p = NULL;
  if (!rv_cuda(name, "cudaMalloc", cudaMalloc(&p, bytes))) return NULL;
  return p;
}

cudaStream_t rv_stream_new(const char *name) {
  cudaStream_t s = NULL;
  if (!rv_cuda(name, "cudaStreamCreateWithFlags",
               cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
    return NULL;
  return s;
}

static void sleep_fn(void *arg) { rv_sleep_ms((double)(intptr_t)arg); }

int rv_stream_sleep(const char *name, cudaStream_t s, int ms) {
  return rv_cuda(name, "cudaLaunchHostFunc",
                 cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)ms));
}

int rv_download(const char *name, void *host, const void *dev, size_t bytes,
                cudaStream_t s) {
  return rv_cuda(
             name, "cudaMemcpyAsync (device to host)",
             cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s)) &&
         rv_cuda(name, "cudaStreamSynchronize", cudaStreamSynchronize(s));
}

int rv_upload(const char *name, void *dev, const void *host, size_t bytes) {
  /* cudaMemcpy from pageable memory may return before the DMA into dev is
   * done, and the checks' own streams do not wait for the legacy stream it
   * ran on: wait for that stream before anything reads dev. */
  return rv_cuda(
             name, "cudaMemcpyAsync (host to device)",
             cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, NULL)) &&
         rv_cuda(name, "cudaStreamSynchronize(NULL)",
                 cudaStreamSynchronize(NULL));
}

coll_status_t rv_comm_world1(const coll_comm_config_t *cfg, coll_comm_t **out) {
  coll_unique_id_t id;
  coll_status_t s = coll_unique_id_create(&id);
  if (s != COLL_OK) return s;
  return coll_comm_init_rank(0, 1, &id, cfg, out);
}

/* ---- the aborting thread ----------------------------------------------------
 */

static void *aborter_main(void *arg) {
  rv_aborter_t *a = arg;
  rv_sleep_ms(a->start_ms + a->delay_ms - rv_now_ms());
  a->abort_ms = rv_now_ms();
  a->status = coll_abort(a->h);
  a->return_ms = rv_now_ms();
  atomic_store(&a->done, 1);
  return NULL;
}

int rv_aborter_start(rv_aborter_t *a, coll_abort_handle_t *h, double delay_ms) {
  memset(a, 0, sizeof *a);
  a->h = h;
  a->delay_ms = delay_ms;
  a->start_ms = rv_now_ms();
  atomic_init(&a->done, 0);
  return pthread_create(&a->th, NULL, aborter_main, a);
}

int rv_aborter_join(rv_aborter_t *a, double limit_ms) {
  double end = rv_now_ms() + limit_ms;
  while (!atomic_load(&a->done) && rv_now_ms() < end) rv_sleep_ms(1);
  if (!atomic_load(&a->done)) return 0;
  pthread_join(a->th, NULL);
  return 1;
}
