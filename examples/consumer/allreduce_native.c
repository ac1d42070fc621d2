/* allreduce_native.c: a program outside strata's tree using the installed native API (strata.h).
 * Run under strata-run: every rank sums (rank + 1) over 1 Mi floats and checks n(n+1)/2 everywhere. */
#include <stdio.h>
#include <stdlib.h>

#include <strata/strata.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    strataResult_t r_ = (call);                                                           \
    if (r_ != strataSuccess) {                                                            \
      fprintf(stderr, "%s failed: %s\n", #call, strataGetErrorString(r_));                \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  strataComm_t comm;
  CHECK(strataCommInitFromEnv(&comm, NULL));
  int rank = 0, n = 0, version = 0;
  CHECK(strataCommUserRank(comm, &rank));
  CHECK(strataCommCount(comm, &n));
  CHECK(strataGetVersion(&version));
  const size_t count = 1 << 20;
  float* buf = malloc(count * sizeof(float));
  if (!buf) return 1;
  for (size_t i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
  CHECK(strataAllReduce(buf, buf, count, strataFloat32, strataSum, comm));
  const float want = (float)n * (float)(n + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += buf[i] != want;
  printf("native: rank %d of %d, strata %d: all-reduce of %zu floats = %.1f (expected %.1f), %zu wrong\n", rank, n,
         version, count, buf[0], want, wrong);
  free(buf);
  CHECK(strataCommDestroy(comm));
  return wrong == 0 ? 0 : 1;
}
