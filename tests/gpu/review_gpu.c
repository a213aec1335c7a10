/* SPDX-License-Identifier: Apache-2.0 */
/* review_gpu.c: the real-GPU checks of libcoll's NCCL backend that can fail
 * on a single GPU, one step per run, driven by tests/gpu/run.sh (CI has no
 * GPU, so ctest never runs it). Each step prints "PASS|FAIL|SKIP name:
 * detail" lines and exits 0, 1 on a failure, or 77 when it cannot run
 * here.
 *
 *   review_gpu STEP       (review_gpu --help lists the steps)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

/* ncclGetVersion's code as text: 22809 is 2.28.9, 2804 (before 2.9) 2.8.4. */
static void nccl_version_text(int code, char *buf, size_t cap) {
  if (code >= 10000)
    snprintf(buf, cap, "%d.%d.%d", code / 10000, code % 10000 / 100,
             code % 100);
  else
    snprintf(buf, cap, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

/* The NCCL that libcoll will load (COLL_NCCL_LIBRARY or libnccl.so.2),
 * opened here on its own to read its version and where it lives. */
static void probe_nccl(void) {
  const char *lib = getenv("COLL_NCCL_LIBRARY");
  int (*get_version)(int *);
  char text[32];
  Dl_info info;
  void *dl, *sym;
  int code = 0;
  if (lib == NULL || lib[0] == '\0') lib = "libnccl.so.2";
  dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    rv_check(0, "probe-nccl", "dlopen(%s): %s", lib, dlerror());
    return;
  }
  sym = dlsym(dl, "ncclGetVersion");
  if (sym == NULL) {
    rv_check(0, "probe-nccl", "%s has no ncclGetVersion", lib);
    return;
  }
  get_version = (int (*)(int *))sym;
  get_version(&code);
  nccl_version_text(code, text, sizeof text);
  if (dladdr(sym, &info) == 0 || info.dli_fname == NULL) info.dli_fname = lib;
  rv_check(code >= 21400, "probe-nccl",
           "NCCL %s (%d) from %s (need >= 2.14 for nonblocking comms)", text,
           code, info.dli_fname);
}

int rv_probe(void) {
  int n = 0, d, drv = 0, rt = 0;
  coll_unique_id_t id;
  coll_status_t s;
  if (!rv_device_ready("probe")) return 1;
  cudaGetDeviceCount(&n);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  for (d = 0; d < n; d++) {
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    printf("note: device %d: %s, sm_%d%d, %.1f GiB, PCI %04x:%02x:%02x\n", d,
           p.name, p.major, p.minor, (double)p.totalGlobalMem / (1 << 30),
           (unsigned)p.pciDomainID, (unsigned)p.pciBusID,
           (unsigned)p.pciDeviceID);
  }
  /* The second review: this line could not fail. A device, and a driver
   * that serves this runtime, are what every later step needs. */
  rv_check(n > 0 && drv >= rt, "probe-cuda",
           "%d device(s); CUDA driver %d.%d, runtime %d.%d (the driver must "
           "be at least the runtime's)",
           n, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
  probe_nccl();
  s = coll_unique_id_create(&id);
  rv_check(s == COLL_OK, "probe-libcoll",
           "libcoll %d (header %d) loads NCCL and makes a unique id: %s",
           coll_version(), COLL_VERSION, rv_status(s));
  return rv_failures() ? 1 : 0;
}

static const struct {
  const char *name;
  int (*run)(void);
  const char *what;
} steps[] = {
    {"probe", rv_probe, "devices, the NCCL that will be loaded, a unique id"},
    {"world1", rv_world1,
     "world-1 comm, out of place: every dtype x op bitwise, copies, premul"},
    {"stream-order", rv_stream_order,
     "a collective behind a 300 ms host function waits for it"},
    {"buffers", rv_buffers, "pageable/pinned refused, managed/async taken"},
    {"watchdog", rv_watchdog, "comm timeout 200 ms behind a 1 s host function"},
    {"abort-thread", rv_abort_thread, "coll_abort from a thread at 100 ms"},
    {"abort-race", rv_abort_race, "coll_abort racing coll_comm_destroy"},
    {"init-timeout", rv_init_timeout, "world-2 init, rank 1 missing, 2 s"},
    {"init-abort", rv_init_abort, "world-2 init ended by coll_abort"},
    {"cpu-rank", rv_cpu_rank,
     "a rank of coll-run -n 4, COLL_BACKEND=cpu, device buffers"},
    {"rank2-colls", rv_rank2_colls,
     "a rank of coll-run -n 2, COLL_BACKEND=nccl, NCCL_HOSTID=h$RANK"},
    {"rank2-exchange", rv_rank2_exchange,
     "the same: isend+irecv 64 MiB each way, send waited first"},
    {"rank2-abort", rv_rank2_abort,
     "the same: rank 1 idles 10 s, rank 0 aborts at 1 s"},
    {"rank2-order", rv_rank2_order,
     "the same: 200 iallreduce read back on the stream without coll_wait"},
    {"rank2-abort-held-stream", rv_rank2_abort_held,
     "the same: coll_abort while a host function holds the stream 3 s"},
    {"rank2-queued-timeout", rv_rank2_queued_timeout,
     "the same: rank 1 silent, rank 0 waits a request queued behind another"},
    {"rank2-shrink", rv_rank2_shrink,
     "the same: a healthy split, then an abort and a shrink without rank 1"},
    {"rank2-latency", rv_rank2_latency,
     "the same: libcoll vs NCCL per call, 8 B to 64 MiB"},
    {"init-blocking", rv_init_blocking,
     "NCCL_COMM_BLOCKING=1: a world-2 init is refused at once"},
    {"m6-probe", rv_m6_probe,
     "driver initialised, no context, CPU allreduce: no context made"},
};

static int usage(FILE *f, int code) {
  size_t i;
  fprintf(f, "usage: review_gpu STEP\n\nsteps:\n");
  for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
    fprintf(f, "  %-24s %s\n", steps[i].name, steps[i].what);
  return code;
}

int main(int argc, char **argv) {
  size_t i;
  if (argc == 2 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
    return usage(stdout, 0);
  if (argc != 2) return usage(stderr, 2);
  for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (strcmp(argv[1], steps[i].name) == 0) return steps[i].run();
  fprintf(stderr, "review_gpu: no step '%s'\n", argv[1]);
  return usage(stderr, 2);
}
