/* SPDX-License-Identifier: Apache-2.0 */
/* env_list.c: the environment variables libcoll reads, for --env. The list
 * comes from the library itself (coll_env_name/coll_env_meaning). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

void perf_print_env(void) {
  int i, n = coll_env_count(), width = 0;
  /* One column for the names, as wide as the longest. */
  for (i = 0; i < n; i++)
    if ((int)strlen(coll_env_name(i)) > width)
      width = (int)strlen(coll_env_name(i));
  printf("# environment variables libcoll reads (value here, meaning)\n");
  for (i = 0; i < n; i++) {
    const char *name = coll_env_name(i), *v = getenv(name);
    /* Never print a secret, only whether it is set. */
    if (v != NULL && strstr(name, "TOKEN") != NULL) v = "(set)";
    printf("%-*s %-16s %s\n", width, name, v != NULL ? v : "(unset)",
           coll_env_meaning(i));
  }
}
