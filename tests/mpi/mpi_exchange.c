/* An MPI program of our own for the Open MPI over UCX over softrdma test
 * (tests/interop/mpi_ucx.sh): blocking point-to-point (a ring with
 * MPI_Sendrecv), non-blocking point-to-point (1 MiB to every other rank with
 * MPI_Isend/MPI_Irecv, every byte checked), and collectives (MPI_Bcast,
 * MPI_Allreduce, MPI_Barrier). Each rank prints "rank R of N: OK" when all
 * of it checked out and exits 0; any mismatch prints what differed and
 * exits 1. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBig = 1 << 20 };

static unsigned char Pattern(int from, int to, size_t i) {
  return (unsigned char)(from * 31 + to * 7 + i * 13);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, errors = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Blocking: a token around the ring. */
  int token = rank * 100, got = -1;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Sendrecv(&token, 1, MPI_INT, next, 1, &got, 1, MPI_INT, prev, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  if (got != prev * 100) {
    fprintf(stderr, "rank %d: ring token %d, expected %d\n", rank, got, prev * 100);
    ++errors;
  }

  /* Non-blocking: 1 MiB to and from every other rank at once. */
  unsigned char* out = malloc((size_t)kBig * size);
  unsigned char* in = malloc((size_t)kBig * size);
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * 2 * size);
  if (!out || !in || !reqs) MPI_Abort(MPI_COMM_WORLD, 2);
  int n = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (size_t i = 0; i < kBig; ++i) out[(size_t)peer * kBig + i] = Pattern(rank, peer, i);
    memset(in + (size_t)peer * kBig, 0, kBig);
    MPI_Irecv(in + (size_t)peer * kBig, kBig, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[n++]);
    MPI_Isend(out + (size_t)peer * kBig, kBig, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[n++]);
  }
  MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (size_t i = 0; i < kBig; ++i) {
      if (in[(size_t)peer * kBig + i] != Pattern(peer, rank, i)) {
        fprintf(stderr, "rank %d: byte %zu from rank %d differs\n", rank, i, peer);
        ++errors;
        break;
      }
    }
  }

  /* Collectives. */
  long seed = rank == 0 ? 424242 : 0;
  MPI_Bcast(&seed, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (seed != 424242) {
    fprintf(stderr, "rank %d: broadcast %ld\n", rank, seed);
    ++errors;
  }
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size + 1) / 2) {
    fprintf(stderr, "rank %d: allreduce %ld\n", rank, sum);
    ++errors;
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (errors == 0) printf("rank %d of %d: OK\n", rank, size);
  free(out);
  free(in);
  free(reqs);
  MPI_Finalize();
  return errors == 0 ? 0 : 1;
}
