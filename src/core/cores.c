/* SPDX-License-Identifier: Apache-2.0 */
/* cores.c: how many cores this process, and this host's ranks, may run on
 * (cores.h). */
#include "core/cores.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define CGROUP_PATH_MAX 1024
#define CPU_LIST_MAX 4096

unsigned coll__cores(void) {
#if UV_VERSION_HEX >= 0x012c00 /* libuv 1.44 */
  return uv_available_parallelism();
#else
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
#endif
}

unsigned coll__cpu_list_count(const char *list) {
  const char *p = list;
  unsigned n = 0;
  while (*p != '\0' && *p != '\n') {
    char *end;
    unsigned long lo = strtoul(p, &end, 10), hi = lo;
    if (end == p) return 0;
    p = end;
    if (*p == '-') {
      hi = strtoul(p + 1, &end, 10);
      if (end == p + 1 || hi < lo) return 0;
      p = end;
    }
    n += (unsigned)(hi - lo + 1);
    if (*p == ',')
      p++;
    else if (*p != '\0' && *p != '\n')
      return 0;
  }
  return n;
}

static unsigned read_list(const char *path) {
  char buf[CPU_LIST_MAX];
  FILE *f = fopen(path, "r");
  unsigned n = 0;
  if (f == NULL) return 0;
  if (fgets(buf, sizeof buf, f) != NULL) n = coll__cpu_list_count(buf);
  fclose(f);
  return n;
}

/* The list in `file` of the group at dir+path or, where a group has none,
 * of its nearest parent's, up to dir itself. */
static unsigned walk_up(const char *dir, char *path, const char *file) {
  for (;;) {
    char full[2 * CGROUP_PATH_MAX];
    char *slash = strrchr(path, '/');
    unsigned n;
    snprintf(full, sizeof full, "%s%s/%s", dir, path, file);
    if ((n = read_list(full)) > 0) return n;
    if (slash == NULL || path[0] == '\0') return 0;
    *slash = '\0'; /* "/a/b" -> "/a" -> "" (the root) */
  }
}

/* Whether the comma-separated `controllers` name `want`. */
static int names(const char *controllers, const char *want) {
  size_t k = strlen(want);
  for (const char *p = controllers; p != NULL; p = strchr(p, ',')) {
    if (*p == ',') p++;
    if (strncmp(p, want, k) == 0 && (p[k] == ',' || p[k] == '\0')) return 1;
  }
  return 0;
}

unsigned coll__cgroup_cpus(const char *proc_cgroup, const char *root) {
  char line[CGROUP_PATH_MAX + 64], v1[CGROUP_PATH_MAX] = "",
                                   v2[CGROUP_PATH_MAX] = "";
  char dir[CGROUP_PATH_MAX];
  int have1 = 0, have2 = 0;
  unsigned n = 0;
  FILE *f = fopen(proc_cgroup, "r");
  if (f == NULL) return 0;
  /* Lines are "id:controllers:path"; cgroup v2's is "0::path". */
  while (fgets(line, sizeof line, f) != NULL) {
    char *a = strchr(line, ':'), *b = a != NULL ? strchr(a + 1, ':') : NULL;
    if (b == NULL) continue;
    *b = '\0';
    b[1 + strcspn(b + 1, "\n")] = '\0';
    if (a[1] == '\0' && !have2) {
      snprintf(v2, sizeof v2, "%s", strcmp(b + 1, "/") == 0 ? "" : b + 1);
      have2 = 1;
    } else if (names(a + 1, "cpuset") && !have1) {
      snprintf(v1, sizeof v1, "%s", strcmp(b + 1, "/") == 0 ? "" : b + 1);
      have1 = 1;
    }
  }
  fclose(f);
  if (have1) {
    snprintf(dir, sizeof dir, "%s/cpuset", root);
    n = walk_up(dir, v1, "cpuset.effective_cpus");
  }
  if (n == 0 && have2) n = walk_up(root, v2, "cpuset.cpus.effective");
  return n;
}

unsigned coll__host_cores(void) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned n = coll__cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
  if (online > 0 && (n == 0 || n > (unsigned long)online)) n = (unsigned)online;
  return n > 0 ? n : 1;
}
