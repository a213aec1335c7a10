/* SPDX-License-Identifier: Apache-2.0 */
/* bench_reduce.c: GB/s of f32/f16/bf16 SUM on 16 MiB arrays (or argv[1]
 * MiB) for every instruction set this CPU has. Not a test: numbers depend
 * on the machine. GB/s counts the bytes moved: dst read, src read, dst
 * written; the best of a few rounds is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "reduce/reduce_impl.h"

#define ROUND_NS 100000000ull /* one timing round: at least 0.1 s */
#define ROUNDS 5              /* the best round counts: others share cores */

static double bench_one(coll_reduce_fn_t fn, void *dst, const void *src,
                        size_t n, size_t bytes) {
  double best = 0;
  fn(dst, src, n); /* warm the pages and caches */
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t t0 = coll__now_ns(), ns;
    int reps = 0;
    do {
      fn(dst, src, n);
      reps++;
      ns = coll__now_ns() - t0;
    } while (ns < ROUND_NS);
    if (3.0 * (double)bytes * reps / (double)ns > best)
      best = 3.0 * (double)bytes * reps / (double)ns;
  }
  return best;
}

int main(int argc, char **argv) {
  static const coll_dtype_t dts[] = {COLL_F32, COLL_F16, COLL_BF16,
                                     COLL_F64, COLL_I32, COLL_I8};
  static const char *const isas[] = {"scalar", "avx2", "avx512"};
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
  size_t bytes = (mib > 0 ? mib : 16) << 20;
  unsigned char *a = malloc(bytes), *b = malloc(bytes);
  if (a == NULL || b == NULL) return 1;
  /* Small values: the sums stay finite however many times they run. */
  memset(a, 0, bytes);
  memset(b, 0, bytes);
  printf("dispatch picks %s; %zu MiB per array; GB/s = 3 x array bytes / s\n",
         coll__reduce_isa(), bytes >> 20);
  printf("%-6s %-8s %8s\n", "dtype", "isa", "GB/s");
  for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
    size_t n = bytes / coll_dtype_size(dts[d]);
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
      coll_reduce_fn_t fn = coll__reduce_fn_isa(isas[i], dts[d], COLL_SUM);
      if (fn == NULL) continue;
      printf("%-6s %-8s %8.2f\n", coll_dtype_name(dts[d]), isas[i],
             bench_one(fn, a, b, n, bytes));
    }
  }
  free(a);
  free(b);
  return 0;
}
