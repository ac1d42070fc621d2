# packaging.cmake: Debian packages of the install components (install.cmake), made by CPack from
# the same build (scripts/package.sh runs `cpack` in build/):
#   libstrata0            runtime: libstrata.so.0, <libdir>/strata/libnccl.so.2
#   libstrata-dev         dev: headers, link symlinks, CMake package, pkg-config files
#   strata-tools          tools: strata-run, -topo, -diagnose, -plan, -train, strata_*_perf, example files
#   python3-strata-torch  python: the strata_torch torch.distributed backend (when built)
# Dependencies: what each package's binaries link, from dpkg-shlibdeps (libhwloc15, libucx0, libfmt,
# libtorch's packages, ...), between our own packages at this exact version, and what the runtime
# loads with dlopen: libibverbs1 (the verbs transport). NVML and the CUDA driver, dlopened on GPU
# machines only, come from NVIDIA's packages, not Debian's, and are not named.
set(CPACK_PACKAGE_NAME strata)
set(CPACK_PACKAGE_VENDOR "strata")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "strata collective-communication runtime")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
if(TARGET strata_torch_ext)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()

set(CPACK_DEBIAN_PACKAGE_MAINTAINER "strata developers <strata-dev@invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # name_version_arch.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps resolves the tools' and the extension's libstrata.so.0 from the build tree; the
# dependency on libstrata0 itself comes from the component dependencies below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/collectives)
# A CUDA build's strata-train links NVIDIA's cuBLAS (the library itself links the CUDA runtime
# statically and loads the driver at run time): NVIDIA's toolkit is no Debian package, so it is
# searched as a private folder and not declared.
if(STRATA_ENABLE_CUDA AND CUDAToolkit_LIBRARY_DIR)
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libstrata0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libibverbs1")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "strata collective-communication runtime: libstrata.so.0 and the drop-in libnccl.so.2
 All-reduce, reduce-scatter, all-gather, all-to-all, broadcast, reduce and send/recv over shared
 memory, tcp, UCX and ibverbs. libnccl.so.2 is installed in a private folder and is used only
 where a program asks for it (LD_LIBRARY_PATH or an rpath).")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libstrata-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_COMPONENT_DEV_DESCRIPTION "strata collective-communication runtime: development files
 Headers, find_package(strata) (strata::strata, strata::nccl) and pkg-config files (strata,
 strata-nccl).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME strata-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "iproute2")  # strata-run --nodes: ip, tc
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "strata collective-communication runtime: tools
 strata-run (launcher, virtual clusters), strata-topo, strata-diagnose, strata-plan (layout
 planner), strata-train (reference trainer) and the strata_*_perf tools (nccl-tests' flags).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-strata-torch)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, python3-torch")
set(CPACK_COMPONENT_PYTHON_DEPENDS runtime)
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "strata collective-communication runtime: torch.distributed backend
 import strata_torch registers the torch.distributed backend strata (CPU tensors).")

include(CPack)
