/* SPDX-License-Identifier: Apache-2.0 */
/* cores.c: how many cores this process may run on (cores.h). */
#include "core/cores.h"

#include <unistd.h>
#include <uv.h>

unsigned coll__cores(void) {
#if UV_VERSION_HEX >= 0x012c00 /* libuv 1.44 */
  return uv_available_parallelism();
#else
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
#endif
}
