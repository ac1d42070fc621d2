"""compare_lib: parsing, running and reporting helpers of perf/compare (strata vs MPI and Gloo on host
memory, or NCCL on device memory)."""
