// SPDX-License-Identifier: Apache-2.0
// gloo_allreduce.cc: Gloo in bench/'s timing loop, as torch.distributed's
// gloo backend calls it: gloo::allreduce with AllreduceOptions (in place,
// float sum), the TCP transport on 127.0.0.1, the ranks meeting through a
// FileStore in a fresh temporary folder. Forks its N ranks itself. Needs
// Debian's libgloo-dev.
//
//   gloo_allreduce N [ring|bcube] [name]     (rank 0 prints the table)
#include <dirent.h>
#include <fcntl.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "bench_loop.h"

namespace {

struct Rank {
  std::shared_ptr<gloo::Context> context;
  gloo::AllreduceOptions::Algorithm algorithm;
};

void ar_gloo(float *buf, size_t count, void *ctx) {
  Rank *r = static_cast<Rank *>(ctx);
  gloo::AllreduceOptions opts(r->context);
  opts.setAlgorithm(r->algorithm);
  opts.setOutput(buf, count);  // in place: the output is also the input
  void (*sum)(void *, const void *, const void *, size_t) = &gloo::sum<float>;
  opts.setReduceFunction(sum);
  gloo::allreduce(opts);
}

int run_rank(int rank, int n, const std::string &dir,
             gloo::AllreduceOptions::Algorithm algorithm, const char *name) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->connectFullMesh(store, dev);
  Rank r{context, algorithm};
  int failed = bench_loop_run(name, rank, n, ar_gloo, &r);
  // Every rank is done with the others' sockets before any closes them.
  gloo::BarrierOptions barrier(context);
  gloo::barrier(barrier);
  return failed;
}

// The FileStore's folder holds one file per key, no subfolders.
void remove_store(const char *dir) {
  if (DIR *d = opendir(dir)) {
    while (struct dirent *e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
  }
  if (rmdir(dir) != 0) std::perror("gloo_allreduce: rmdir");
}

}  // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 0;
  std::string algo = argc > 2 ? argv[2] : "ring";
  std::string name = argc > 3 ? argv[3] : "gloo_" + algo;
  gloo::AllreduceOptions::Algorithm algorithm;
  if (n < 1 || n > 256) {
    std::fprintf(stderr, "usage: gloo_allreduce N [ring|bcube] [name]\n");
    return 2;
  }
  if (algo == "ring") {
    algorithm = gloo::AllreduceOptions::Algorithm::RING;
  } else if (algo == "bcube") {
    algorithm = gloo::AllreduceOptions::Algorithm::BCUBE;
  } else {
    std::fprintf(stderr, "gloo_allreduce: unknown algorithm '%s'\n",
                 algo.c_str());
    return 2;
  }
  char dir[] = "/tmp/gloo-bench.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::fflush(stdout);
  for (int rank = 0; rank < n; rank++) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      int rc;
      try {
        rc = run_rank(rank, n, dir, algorithm, name.c_str());
      } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", rank, e.what());
        rc = 1;
      }
      std::fflush(stdout);
      _exit(rc);
    }
  }
  int worst = 0;
  for (int i = 0; i < n; i++) {
    int status = 0;
    if (wait(&status) < 0) break;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code > worst) worst = code;
  }
  remove_store(dir);
  return worst;
}
