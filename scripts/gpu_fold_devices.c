/* gpu_fold_devices.c: an LD_PRELOAD shim that folds CUDA device ordinals onto the GPUs present, for
 * programs linked to the dynamic CUDA runtime (libcudart.so) that give each rank of a process its own
 * ordinal. nccl-tests does: with -t N threads (and NCCL_TESTS_DEVICE=b) thread i uses device b + i and
 * refuses to start when b + N exceeds cudaGetDeviceCount. Under this shim cudaGetDeviceCount reports
 * GPU_FOLD_COUNT devices (default 8) and every ordinal d given to cudaSetDevice,
 * cudaDeviceGetAttribute and cudaGetDeviceProperties becomes d % (the real count), so the N threads of
 * one process share one GPU. The program is not modified; libraries that link the runtime statically
 * (strata's libnccl.so.2) are not affected. GPU_FOLD_DEBUG=1 logs each folded call to stderr.
 *
 *   cc -shared -fPIC -o libgpu_fold_devices.so scripts/gpu_fold_devices.c -ldl
 *   LD_PRELOAD=$PWD/libgpu_fold_devices.so NCCL_TESTS_DEVICE=0 all_reduce_perf -g 1 -t 4
 *
 * Built and used by scripts/gpu_validate.sh (stage nccl-tests). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int cuda_error; /* enum cudaError_t: 0 is cudaSuccess */

static void* next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) fprintf(stderr, "gpu_fold_devices: %s not found in the CUDA runtime\n", name);
  return f;
}

static int debug(void) {
  const char* v = getenv("GPU_FOLD_DEBUG");
  return v && *v == '1';
}

static int real_count = -1;

static int fold(int dev) {
  if (real_count < 1) {
    cuda_error (*count)(int*) = (cuda_error(*)(int*))next("cudaGetDeviceCount");
    int n = 0;
    if (count && count(&n) == 0 && n > 0) real_count = n;
  }
  int d = (real_count > 0 && dev >= 0) ? dev % real_count : dev;
  if (debug() && d != dev) fprintf(stderr, "gpu_fold_devices: device %d -> %d\n", dev, d);
  return d;
}

cuda_error cudaGetDeviceCount(int* count) {
  static cuda_error (*real)(int*);
  if (!real) real = (cuda_error(*)(int*))next("cudaGetDeviceCount");
  if (!real) return 1;
  cuda_error e = real(count);
  if (e == 0 && *count > 0) {
    real_count = *count;
    const char* v = getenv("GPU_FOLD_COUNT");
    int n = v ? atoi(v) : 8;
    if (n > *count) *count = n;
  }
  if (debug()) fprintf(stderr, "gpu_fold_devices: cudaGetDeviceCount -> error %d, %d devices (%d real)\n", e,
                       count ? *count : -1, real_count);
  return e;
}

cuda_error cudaSetDevice(int dev) {
  static cuda_error (*real)(int);
  if (!real) real = (cuda_error(*)(int))next("cudaSetDevice");
  return real ? real(fold(dev)) : 1;
}

cuda_error cudaDeviceGetAttribute(int* value, int attr, int dev) {
  static cuda_error (*real)(int*, int, int);
  if (!real) real = (cuda_error(*)(int*, int, int))next("cudaDeviceGetAttribute");
  return real ? real(value, attr, fold(dev)) : 1;
}

cuda_error cudaGetDeviceProperties(void* prop, int dev) {
  static cuda_error (*real)(void*, int);
  if (!real) real = (cuda_error(*)(void*, int))next("cudaGetDeviceProperties");
  return real ? real(prop, fold(dev)) : 1;
}

/* CUDA 12's header maps cudaGetDeviceProperties to this name. */
cuda_error cudaGetDeviceProperties_v2(void* prop, int dev) {
  static cuda_error (*real)(void*, int);
  if (!real) real = (cuda_error(*)(void*, int))next("cudaGetDeviceProperties_v2");
  return real ? real(prop, fold(dev)) : 1;
}
