/* SPDX-License-Identifier: Apache-2.0 */
/* cores.h: how many cores this process, and this host's ranks, may run on. */
#ifndef COLL_CORE_CORES_H
#define COLL_CORE_CORES_H

/* The CPUs of this process's affinity mask where libuv can tell, else the
 * online ones; at least 1. Any thread. */
unsigned coll__cores(void);

/* The CPUs this host gives the job, shared by its ranks: those of the
 * process's cpuset cgroup (a container's, a batch system's allocation),
 * else the online ones; at least 1. Not the affinity mask: a launcher that
 * binds each rank to a core of its own (coll-run does by default) narrows
 * that to one although no two ranks share a core. Any thread. */
unsigned coll__host_cores(void);

/* The parts, for tests. The number of CPUs in a kernel CPU list such as
 * "0-3,8,10-11\n"; 0 if it is empty or malformed. */
unsigned coll__cpu_list_count(const char *list);
/* The CPUs of the cpuset cgroup that `proc_cgroup` (the format of
 * /proc/self/cgroup) names, with the cgroup filesystems under `root`
 * (cgroup v1's cpuset hierarchy at root/cpuset, v2's at root); a v2 group
 * without the controller takes its nearest parent's. 0 if none reads. */
unsigned coll__cgroup_cpus(const char *proc_cgroup, const char *root);

#endif
