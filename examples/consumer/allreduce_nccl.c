/* allreduce_nccl.c: an NCCL program (nccl.h, ncclAllReduce) built against strata's installed NCCL
 * ABI and run on its libnccl.so.2. Under strata-run every rank gets the job's id from ncclGetUniqueId
 * and the rank and size from STRATA_RANK and STRATA_WORLD_SIZE. Host buffers, NULL stream. */
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess) {                                                              \
      fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(r_));                  \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  const char* rank_env = getenv("STRATA_RANK");
  const char* size_env = getenv("STRATA_WORLD_SIZE");
  if (!rank_env || !size_env) {
    fprintf(stderr, "run me under strata-run (STRATA_RANK, STRATA_WORLD_SIZE unset)\n");
    return 2;
  }
  int rank = atoi(rank_env), n = atoi(size_env), version = 0;
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, n, id, rank));
  CHECK(ncclGetVersion(&version));
  const size_t count = 1 << 20;
  double* buf = malloc(count * sizeof(double));
  if (!buf) return 1;
  for (size_t i = 0; i < count; ++i) buf[i] = (double)(rank + 1) * (double)i;
  CHECK(ncclAllReduce(buf, buf, count, ncclFloat64, ncclSum, comm, NULL));
  const double factor = (double)n * (double)(n + 1) / 2.0;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += buf[i] != factor * (double)i;
  printf("nccl: rank %d of %d, NCCL version %d: all-reduce of %zu doubles, %zu wrong\n", rank, n, version, count, wrong);
  free(buf);
  CHECK(ncclCommDestroy(comm));
  return wrong == 0 ? 0 : 1;
}
