/* SPDX-License-Identifier: Apache-2.0 */
/* entry.c: coll-perf's main: the benchmark (main.c) with device buffers from
 * the CUDA runtime for --nccl. */
#include "perf.h"

int main(int argc, char **argv) {
  return perf_main(argc, argv, perf_device_cuda);
}
