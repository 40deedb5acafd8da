# libtether: one shared library made of every component's object library.
get_property(_components GLOBAL PROPERTY TETHER_COMPONENTS)
# Linking an object library adds its objects to this target and passes on its usage
# requirements inside the build tree only.
get_property(_transports GLOBAL PROPERTY TETHER_TRANSPORTS)
string(REPLACE ";" " " _transports "${_transports}")
configure_file(runtime/base/build_info.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/build_info.cpp @ONLY)
add_library(tether SHARED ${CMAKE_CURRENT_BINARY_DIR}/build_info.cpp)
add_library(tether::tether ALIAS tether)
# Calls inside libtether bind locally: no PLT hops on the allocation fast paths.
target_link_options(tether PRIVATE -Wl,-Bsymbolic-functions)
set_target_properties(tether PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
foreach(_component IN LISTS _components)
  target_link_libraries(tether PUBLIC $<BUILD_INTERFACE:${_component}>)
endforeach()
target_include_directories(tether PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(tether PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/runtime/include)
target_link_libraries(tether PUBLIC fmt::fmt tl::expected Threads::Threads)

add_executable(tether-info runtime/info/tether_info.cpp)
target_link_libraries(tether-info PRIVATE tether tether_warnings)
