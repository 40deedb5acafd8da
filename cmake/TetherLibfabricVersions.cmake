# libtether loads libfabric with dlopen (transport/ofi/libfabric.hpp) and must then bind the
# symbol versions a link against these headers would bind: libfabric versions fi_getinfo,
# fi_dupinfo and fi_freeinfo by the layout of struct fi_info, and a newer libfabric.so.1
# found at run time defaults to a newer layout than the headers describe. A probe program
# linked against libfabric at configure time names them (readelf); each becomes
# TETHER_<NAME>_VERSION for dlvsym.
set(_probe_dir ${CMAKE_BINARY_DIR}/libfabric-versions)
file(WRITE ${_probe_dir}/probe.c [=[
#include <rdma/fabric.h>
int main(void) {
  struct fi_info* info = fi_dupinfo(0);
  fi_freeinfo(info);
  return fi_getinfo(0, 0, 0, 0, 0, 0) + fi_fabric(0, 0, 0) + (fi_strerror(0) != 0);
}
]=])
try_compile(_probe_built ${_probe_dir}/build SOURCES ${_probe_dir}/probe.c
  LINK_LIBRARIES PkgConfig::LIBFABRIC COPY_FILE ${_probe_dir}/probe OUTPUT_VARIABLE _probe_output)
if(NOT _probe_built)
  message(FATAL_ERROR "cannot link a program against libfabric (apt-get install libfabric-dev):\n${_probe_output}")
endif()
find_program(TETHER_READELF NAMES readelf REQUIRED)
execute_process(COMMAND ${TETHER_READELF} --dyn-syms --wide ${_probe_dir}/probe
  OUTPUT_VARIABLE _probe_symbols COMMAND_ERROR_IS_FATAL ANY)
set(TETHER_LIBFABRIC_VERSIONS "")
foreach(_function IN ITEMS fi_getinfo fi_freeinfo fi_dupinfo fi_fabric fi_strerror)
  if(NOT _probe_symbols MATCHES " ${_function}@([A-Za-z0-9_.]+)")
    message(FATAL_ERROR "libfabric's ${_function} carries no symbol version (readelf --dyn-syms ${_probe_dir}/probe)")
  endif()
  string(TOUPPER ${_function} _name)
  list(APPEND TETHER_LIBFABRIC_VERSIONS "TETHER_${_name}_VERSION=\"${CMAKE_MATCH_1}\"")
endforeach()
message(STATUS "libfabric symbol versions: ${TETHER_LIBFABRIC_VERSIONS}")
