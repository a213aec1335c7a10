/* SPDX-License-Identifier: Apache-2.0 */
/* cores.h: how many cores this process may run on. */
#ifndef COLL_CORE_CORES_H
#define COLL_CORE_CORES_H

/* The CPUs of this process's affinity mask where libuv can tell, else the
 * online ones; at least 1. Any thread. */
unsigned coll__cores(void);

#endif
