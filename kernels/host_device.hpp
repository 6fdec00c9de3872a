#pragma once
// TASP_HD: a function compiled for the host and, under nvcc, for the device too, so that the kernels' arithmetic is
// tested on the CPU (tasp_kernel_math_tests) as the kernels run it.
#ifdef __CUDACC__
#define TASP_HD __host__ __device__ __forceinline__
#else
#define TASP_HD inline
#endif
