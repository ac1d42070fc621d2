"""compare_lib: parsing, running and reporting helpers of perf/compare (strata vs MPI and Gloo)."""
