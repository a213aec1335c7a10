/* SPDX-License-Identifier: Apache-2.0 */
/* proc_util.h: running the tools as child processes from the tests, with
 * captured output and a bounded wait. */
#ifndef COLL_TEST_PROC_UTIL_H
#define COLL_TEST_PROC_UTIL_H

#include <stdint.h>
#include <sys/types.h>

/* A started tool: its pid and the files its stdout/stderr go to. */
typedef struct proc {
  pid_t pid;
  char out_path[64], err_path[64];
} proc_t;

/* Starts argv (argv[0] is a path) with stdout/stderr in temp files and
 * extra environment variables envs[] ("NAME=value", NULL-terminated, may be
 * NULL). 0 on success. */
int proc_start(proc_t *p, char *const argv[], char *const envs[]);
/* Waits up to timeout_ms; returns the exit code (128+sig if killed), or -1
 * after killing it when it ran too long (a message says so). Fills *out and
 * *err (malloc'd, NUL-terminated; may be NULL to skip) and removes the
 * files. */
int proc_wait(proc_t *p, int64_t timeout_ms, char **out, char **err);
/* proc_start + proc_wait. */
int proc_run(char *const argv[], char *const envs[], int64_t timeout_ms,
             char **out, char **err);

/* 1 if pid is a live process (a zombie counts as dead), else 0. */
int proc_alive(pid_t pid);
/* Waits up to timeout_ms for pid to be dead; returns 1 if it is. */
int proc_wait_dead(pid_t pid, int64_t timeout_ms);
/* The pid in file dir/name.rank, or -1. */
pid_t proc_read_pid(const char *dir, const char *name, int rank);
/* Waits up to timeout_ms for dir/name.rank to hold a pid, for every rank
 * below world; returns 1 if all do. */
int proc_wait_pid_files(const char *dir, const char *name, int world,
                        int64_t timeout_ms);
/* A fresh temp directory (path in buf, 64 bytes) / its removal. */
int proc_temp_dir(char *buf);
void proc_remove_dir(const char *dir);

/* Number of lines of text equal to `line` (without its newline). */
int proc_count_lines(const char *text, const char *line);

#endif
