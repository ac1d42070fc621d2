# install.cmake: what `cmake --install build [--prefix P]` installs, by component (the Debian
# packages of packaging.cmake are these components):
#   runtime  libstrata.so.0 (native API) and the drop-in libnccl.so.2 in <libdir>/strata, a private
#            folder, so that it replaces a system NCCL only when asked (LD_LIBRARY_PATH or an rpath)
#   dev      headers (strata/strata.h, strata/strata.hpp, and NCCL's ABI header as
#            strata/nccl/nccl.h, never on a default include path), the link symlinks, the CMake
#            package (find_package(strata): strata::strata, strata::nccl) and pkg-config files
#            (strata, strata-nccl)
#   tools    strata-run, strata-topo, strata-diagnose, strata-plan, strata-train, the perf tools as
#            strata_<name>_perf (nccl-tests' names stay free), topology and planner example files
#   python   the strata_torch package, where the interpreter looks (when the backend is built)
# Every installed binary finds libstrata through an rpath relative to itself, so an install under any
# prefix runs without LD_LIBRARY_PATH.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(STRATA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/strata" CACHE STRING "Where find_package(strata) files go")
set(STRATA_INSTALL_NCCL_LIBDIR "${CMAKE_INSTALL_LIBDIR}/strata" CACHE STRING "Private folder of the drop-in libnccl.so.2")
set(STRATA_INSTALL_NCCL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/strata/nccl" CACHE STRING "Folder of strata's nccl.h")

# strata_install_rpath(TARGET DESTINATION): the target finds <libdir> relative to where it lies.
function(strata_install_rpath target destination)
  file(RELATIVE_PATH _rel "/prefix/${destination}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
  if(_rel STREQUAL "")
    set(_rel ".")
  endif()
  # A build rpath even where nothing shared is linked from the build tree, for install to rewrite.
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/${_rel}"
                        BUILD_RPATH "${PROJECT_BINARY_DIR}/collectives")
endfunction()

# ---- runtime and dev: the libraries, their headers and package files
target_include_directories(strata INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS strata EXPORT strataTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(FILES include/strata/strata.h include/strata/strata.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata COMPONENT dev)
if(TARGET nccl)
  target_include_directories(nccl INTERFACE $<INSTALL_INTERFACE:${STRATA_INSTALL_NCCL_INCLUDEDIR}>)
  install(TARGETS nccl EXPORT strataTargets
    LIBRARY DESTINATION ${STRATA_INSTALL_NCCL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
  install(FILES include/nccl/nccl.h DESTINATION ${STRATA_INSTALL_NCCL_INCLUDEDIR} COMPONENT dev)
endif()
install(EXPORT strataTargets NAMESPACE strata:: DESTINATION ${STRATA_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(scripts/cmake/strataConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/strataConfig.cmake
  INSTALL_DESTINATION ${STRATA_INSTALL_CMAKEDIR})
# 0.x: a minor release may break the API, so 0.1 accepts 0.1.y only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/packaging/strataConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/packaging/strataConfig.cmake ${PROJECT_BINARY_DIR}/packaging/strataConfigVersion.cmake
  DESTINATION ${STRATA_INSTALL_CMAKEDIR} COMPONENT dev)
# pkg-config: the prefix is the one installed to (a --prefix given at install time, or the
# packaging prefix), written when installing; absolute, so that /usr gives plain -I/usr/include.
set(STRATA_PC_PREFIX "@STRATA_PC_PREFIX@")  # kept for the install-time pass
foreach(_pc strata strata-nccl)
  configure_file(scripts/cmake/${_pc}.pc.in ${PROJECT_BINARY_DIR}/packaging/${_pc}.pc.in @ONLY)
  install(CODE "set(STRATA_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/packaging/${_pc}.pc.in\"
                   \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/${_pc}.pc\" @ONLY)
    message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/${_pc}.pc\")"
    COMPONENT dev)
endforeach()

# ---- tools
set(_strata_tools strata-run strata-topo strata-diagnose strata-plan strata-train)
foreach(_tool IN LISTS _strata_tools)
  if(TARGET ${_tool})
    strata_install_rpath(${_tool} ${CMAKE_INSTALL_BINDIR})
    install(TARGETS ${_tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()
# The perf tools keep nccl-tests' names in the build tree (the docs and nccl-tests habits use them)
# and are installed as strata_<name>_perf.
foreach(_pair IN LISTS STRATA_PERF_COLLS)
  string(REPLACE ":" ";" _pair "${_pair}")
  list(GET _pair 0 _name)
  if(TARGET ${_name}_perf)
    strata_install_rpath(${_name}_perf ${CMAKE_INSTALL_BINDIR})
    install(TARGETS ${_name}_perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
    install(CODE "file(RENAME \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${_name}_perf\"
                              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/strata_${_name}_perf\")"
            COMPONENT tools)
  endif()
endforeach()
install(DIRECTORY topology/files/ DESTINATION ${CMAKE_INSTALL_DATADIR}/strata/topology COMPONENT tools
  FILES_MATCHING PATTERN "*.json")
if(TARGET strata-plan)
  install(DIRECTORY planner/models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/strata/planner/models COMPONENT tools
    FILES_MATCHING PATTERN "*.json")
endif()

# ---- python: strata_torch where the interpreter finds it (Debian: dist-packages; under /usr the
# version-independent python3/dist-packages that Debian's own python3-* packages use).
if(TARGET strata_torch_ext)
  if(NOT STRATA_INSTALL_PYTHONDIR)
    execute_process(COMMAND "${STRATA_TORCH_PYTHON}" -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"
                    OUTPUT_VARIABLE _pyver OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
      set(_pydir "lib/python3/dist-packages")
    else()
      set(_pydir "lib/python${_pyver}/dist-packages")
    endif()
    set(STRATA_INSTALL_PYTHONDIR "${_pydir}" CACHE STRING "Where strata_torch is installed (relative to the prefix)")
  endif()
  strata_install_rpath(strata_torch_ext ${STRATA_INSTALL_PYTHONDIR}/strata_torch)
  install(TARGETS strata_torch_ext LIBRARY DESTINATION ${STRATA_INSTALL_PYTHONDIR}/strata_torch COMPONENT python)
  install(FILES integrations/pytorch/strata_torch/__init__.py
    DESTINATION ${STRATA_INSTALL_PYTHONDIR}/strata_torch COMPONENT python)
endif()
