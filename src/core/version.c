/* SPDX-License-Identifier: Apache-2.0 */
/* version.c: the library's version, as the header it was built from
 * states it (COLL_VERSION_MAJOR/MINOR/PATCH). */
#include "coll.h"

int coll_version(void) { return COLL_VERSION; }
