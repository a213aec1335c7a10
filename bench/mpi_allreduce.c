/* SPDX-License-Identifier: Apache-2.0 */
/* mpi_allreduce.c: Open MPI (any MPI) in bench/'s timing loop:
 * MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD). The
 * transport is what mpirun's options pick (vs-peers.sh: TCP over loopback,
 * or shared memory). Needs the MPI headers and compiler wrapper: Debian's
 * libopenmpi-dev (mpicc), and openmpi-bin (mpirun).
 *
 *   mpirun -np N mpi_allreduce [name]        (rank 0 prints the table) */
#include <mpi.h>
#include <stdio.h>

#include "bench_loop.h"

static void ar_mpi(float *buf, size_t count, void *ctx) {
  int rc;
  (void)ctx;
  rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "MPI_Allreduce failed (%d)\n", rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int main(int argc, char **argv) {
  int rank, size, failed;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  failed = bench_loop_run(argc > 1 ? argv[1] : "mpi", rank, size, ar_mpi, NULL);
  MPI_Finalize();
  return failed;
}
