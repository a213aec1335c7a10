/* SPDX-License-Identifier: Apache-2.0 */
/* store_push_main.c: the store_push tool: a stranger pushes values into a
 * running job's rendezvous store, and the growth of the resident memory
 * of the process that serves it (rank 0) is measured.
 *
 *   store_push HOST PORT [--mib N] [--pid PID] [--token T]
 *              [--max-growth-mib M]
 *
 * Pushes N MiB (default 1024) of 64 KiB values under fresh keys, starting
 * a new connection whenever the store refuses one. With --pid, reads that
 * process's VmRSS before and after and its peak (VmHWM), and exits 1 when
 * the peak exceeds the first reading by M MiB or more (default 64). Exit
 * codes: 0 ok, 1 the memory grew too much or the store never refused, 2
 * the push could not run, 3 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/store/store.h"
#include "store_push.h"

#define PUSH_TIMEOUT_MS (600 * 1000)

static int usage(void) {
  fprintf(stderr,
          "usage: store_push HOST PORT [--mib N] [--pid PID] [--token T] "
          "[--max-growth-mib M]\n");
  return 3;
}

int main(int argc, char **argv) {
  long long mib = 1024, max_growth = 64;
  int pid = 0, port, i;
  const char *token = NULL;
  int64_t rss0 = 0, peak0 = 0, rss1 = 0, peak1 = 0;
  store_push_report_t rep;
  int rc;
  if (argc < 3) return usage();
  port = atoi(argv[2]);
  for (i = 3; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--mib") == 0)
      mib = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--pid") == 0)
      pid = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--token") == 0)
      token = argv[i + 1];
    else if (strcmp(argv[i], "--max-growth-mib") == 0)
      max_growth = atoll(argv[i + 1]);
    else
      return usage();
  }
  if (i != argc || port < 1 || port > 65535 || mib < 1) return usage();
  if (pid > 0 && store_push_rss_kib(pid, &rss0, &peak0) != 0) {
    fprintf(stderr, "store_push: cannot read /proc/%d/status\n", pid);
    return 2;
  }
  rc = store_push(argv[1], port, token, (uint64_t)mib << 20,
                  COLL_STORE_VALUE_MAX, "push/", PUSH_TIMEOUT_MS, &rep);
  printf(
      "store_push: offered %llu MiB in %.2f s over %llu connections: "
      "%llu values (%.2f MiB) stored, %llu refused\n",
      (unsigned long long)(rep.offered >> 20), rep.elapsed_ms / 1000.0,
      (unsigned long long)rep.connects, (unsigned long long)rep.keys,
      rep.stored / 1048576.0, (unsigned long long)rep.refused);
  if (rep.first_refusal[0] != '\0')
    printf("store_push: first refusal: %s\n", rep.first_refusal);
  if (rc != 0) {
    fprintf(stderr, "store_push: %s\n", rep.failure);
    return 2;
  }
  if (pid > 0) {
    if (store_push_rss_kib(pid, &rss1, &peak1) != 0) {
      fprintf(stderr, "store_push: process %d is gone\n", pid);
      return 2;
    }
    printf(
        "store_push: process %d: VmRSS %.1f MiB before, %.1f MiB after, "
        "peak %.1f MiB: grew %.1f MiB at most\n",
        pid, rss0 / 1024.0, rss1 / 1024.0, peak1 / 1024.0,
        (peak1 - rss0) / 1024.0);
    if (store_push_sanitized()) {
      printf(
          "store_push: a sanitizer build: its allocator keeps freed "
          "memory, so the growth is not judged\n");
    } else if (peak1 - rss0 >= max_growth * 1024) {
      fprintf(stderr, "store_push: grew by %lld MiB or more\n", max_growth);
      return 1;
    }
  }
  if (rep.refused == 0) {
    fprintf(stderr, "store_push: the store took everything\n");
    return 1;
  }
  return 0;
}
