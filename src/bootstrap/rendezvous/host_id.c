/* SPDX-License-Identifier: Apache-2.0 */
/* host_id.c: the host identity ranks compare to learn they can share
 * memory. */
#include "bootstrap/rendezvous/host_id.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

coll_host_id_test_hook_t coll__host_id_test_hook = {-1, NULL};

static void read_boot_id(char *out, size_t cap) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  out[0] = '\0';
  if (f == NULL) return;
  if (fgets(out, (int)cap, f) == NULL) out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

static unsigned long long ns_inode(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

void coll__host_id(char out[COLL_HOST_ID_MAX]) {
  char boot[64];
  read_boot_id(boot, sizeof boot);
  /* Without a boot id this process is a host of its own: sharing memory
   * is then never assumed. */
  if (boot[0] == '\0')
    snprintf(boot, sizeof boot, "unknown-pid%d", (int)getpid());
  snprintf(out, COLL_HOST_ID_MAX, "%s/net:%llu/ipc:%llu", boot,
           ns_inode("/proc/self/ns/net"), ns_inode("/proc/self/ns/ipc"));
}
