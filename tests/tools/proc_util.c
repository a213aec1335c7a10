/* SPDX-License-Identifier: Apache-2.0 */
/* proc_util.c: child processes for the tool tests (see proc_util.h). */
#include "proc_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static int temp_file(char *path) {
  int fd;
  snprintf(path, 64, "/tmp/coll-tools-XXXXXX");
  fd = mkstemp(path);
  if (fd < 0) path[0] = '\0';
  return fd;
}

int proc_start(proc_t *p, char *const argv[], char *const envs[]) {
  int out_fd = temp_file(p->out_path), err_fd = temp_file(p->err_path), i;
  p->pid = -1;
  if (out_fd < 0 || err_fd < 0) goto fail;
  p->pid = fork();
  if (p->pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    for (i = 0; envs != NULL && envs[i] != NULL; i++) putenv(envs[i]);
    execv(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
fail:
  if (out_fd >= 0) close(out_fd);
  if (err_fd >= 0) close(err_fd);
  return p->pid > 0 ? 0 : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
    n = (long)fread(buf, 1, (size_t)n, f);
    buf[n] = '\0';
  }
  fclose(f);
  return buf;
}

int proc_wait(proc_t *p, int64_t timeout_ms, char **out, char **err) {
  int64_t deadline = test_now_ms() + timeout_ms;
  int status = 0, code = -1;
  pid_t w;
  while ((w = waitpid(p->pid, &status, WNOHANG)) == 0 &&
         test_now_ms() < deadline)
    test_sleep_ms(5);
  if (w == 0) {
    fprintf(stderr, "HANG: %s still ran after %lld ms; killed\n", p->out_path,
            (long long)timeout_ms);
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &status, 0);
  } else if (w == p->pid) {
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  if (out != NULL) *out = slurp(p->out_path);
  if (err != NULL) *err = slurp(p->err_path);
  unlink(p->out_path);
  unlink(p->err_path);
  return code;
}

int proc_run(char *const argv[], char *const envs[], int64_t timeout_ms,
             char **out, char **err) {
  proc_t p;
  if (proc_start(&p, argv, envs) != 0) return -1;
  return proc_wait(&p, timeout_ms, out, err);
}

int proc_alive(pid_t pid) {
  char path[64], buf[512], *paren;
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  if (f == NULL) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* "pid (comm) S ...": the state follows the last ')'. */
  paren = strrchr(buf, ')');
  if (paren == NULL || paren[1] == '\0') return 0;
  return paren[2] != 'Z' && paren[2] != 'X';
}

int proc_wait_dead(pid_t pid, int64_t timeout_ms) {
  int64_t deadline = test_now_ms() + timeout_ms;
  while (proc_alive(pid)) {
    if (test_now_ms() >= deadline) return 0;
    test_sleep_ms(10);
  }
  return 1;
}

pid_t proc_read_pid(const char *dir, const char *name, int rank) {
  char path[256];
  FILE *f;
  int pid = -1;
  snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%d", &pid) != 1) pid = -1;
  fclose(f);
  return (pid_t)pid;
}

int proc_wait_pid_files(const char *dir, const char *name, int world,
                        int64_t timeout_ms) {
  int64_t deadline = test_now_ms() + timeout_ms;
  int r;
  for (;;) {
    for (r = 0; r < world; r++)
      if (proc_read_pid(dir, name, r) <= 0) break;
    if (r == world) return 1;
    if (test_now_ms() >= deadline) return 0;
    test_sleep_ms(10);
  }
}

int proc_temp_dir(char *buf) {
  snprintf(buf, 64, "/tmp/coll-tools-XXXXXX");
  return mkdtemp(buf) != NULL ? 0 : -1;
}

void proc_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[512];
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

int proc_count_lines(const char *text, const char *line) {
  size_t len = strlen(line);
  int n = 0;
  const char *p = text;
  while (p != NULL && *p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t l = nl != NULL ? (size_t)(nl - p) : strlen(p);
    if (l == len && memcmp(p, line, len) == 0) n++;
    p = nl != NULL ? nl + 1 : NULL;
  }
  return n;
}
